"""Files the commands are given: read-only commands never create one; commands that write say when they create a
directory; a blank value means the option was not given; a file that is not a ucudnn cache is refused before
anything runs (it is never touched)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


class MissingFile(Exception):
    """A read-only command was given a path that does not exist (the message names it)."""


class NotACache(Exception):
    """A command was given, as its cache, a file that is not a ucudnn cache (the message names it and says why)."""


class BadJson(Exception):
    """A file a command was given to read could not be read as JSON (the message names it and says why)."""


def read_json(file: str, what: str) -> Any:
    """The JSON document in ``file`` (``-``: standard input), only read; BadJson where it cannot be read, is not
    UTF-8 text or not JSON, or is nested too deeply to be ``what``."""
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadJson(f"cannot read {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise BadJson(f"{file} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadJson(f"{file} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise BadJson(f"{file} is nested too deeply to be {what}") from None


def blank(value: str | None) -> bool:
    """True for an option value that is empty or only blanks: the option counts as not given (the rule every
    UCUDNN_* variable follows; no file is ever named by blanks)."""
    return value is not None and not value.strip()


def refuse_foreign(path: Path) -> None:
    """NotACache if ``path`` holds a file that is not a ucudnn cache (judged from its header; nothing is written)."""
    from ucudnn.cache import foreign_reason

    why = foreign_reason(path)
    if why:
        raise NotACache(f"{path} is not a ucudnn cache: {why}; it was left as it is (name another file)")


def existing_cache(path: Path) -> Path:
    """``path`` if a cache file is there; else MissingFile, and nothing is created (a typo must not become an empty
    cache)."""
    if path.is_file():
        return path
    if path.exists():
        raise MissingFile(f"{path} is not a file")
    where = "its directory does not exist either" if not path.parent.is_dir() else "nothing has been cached there"
    raise MissingFile(f"no cache at {path} ({where}; --database or UCUDNN_DATABASE names the file)")


def ensure_parent(path: Path, prog: str) -> None:
    """Create the directory ``path`` will be written in, saying so on stderr (once: later calls find it)."""
    parent = path.expanduser().parent
    if parent.exists() and not parent.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(parent))
    if not parent.exists():
        parent.mkdir(parents=True, exist_ok=True)
        print(f"{prog}: created directory {parent}", file=sys.stderr)
