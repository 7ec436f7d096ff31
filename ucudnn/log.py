"""The ``ucudnn`` logger: one place that decides where messages go and how loud they are.

Messages go to stderr, each line prefixed ``ucudnn:``, at the level named by ``UCUDNN_LOG_LEVEL`` (default
``warning``, so the library is silent unless something needs the user's attention). The logger does not
propagate: ucudnn runs inside other people's programs, and their root-logger setup should neither silence our
warnings nor print them twice.
"""

from __future__ import annotations

import logging
import sys
import threading

from ucudnn import config

LOGGER_NAME = "ucudnn"

_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
_lock = threading.Lock()
_configured = False


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at emit time (so redirection and test capture see our output)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        tag = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
        return "\n".join(f"ucudnn: {tag}{line}" for line in text.splitlines() or [""])


def level_from_env() -> int:
    """The logging level UCUDNN_LOG_LEVEL asks for; a bad value warns (once, at setup) and means ``warning``."""
    try:
        return _LEVELS[str(config.get("UCUDNN_LOG_LEVEL"))]
    except config.ConfigError:
        return logging.WARNING


def setup(*, force: bool = False) -> logging.Logger:
    """Install the stderr handler and level once (again with ``force``, e.g. after changing the variable)."""
    global _configured
    logger = logging.getLogger(LOGGER_NAME)
    with _lock:
        if _configured and not force:
            return logger
        for handler in list(logger.handlers):
            if isinstance(handler, _StderrHandler):
                logger.removeHandler(handler)
        handler = _StderrHandler()
        handler.setFormatter(_Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(level_from_env())
        _configured = True
    try:
        config.get("UCUDNN_LOG_LEVEL")
    except config.ConfigError as exc:
        logger.warning("%s; using warning", exc)
    return logger


def get_logger(name: str | None = None) -> logging.Logger:
    """The ``ucudnn`` logger (or a child, ``ucudnn.<name>``), set up on first use."""
    setup()
    return logging.getLogger(LOGGER_NAME if not name else f"{LOGGER_NAME}.{name}")
