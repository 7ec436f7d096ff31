"""The argument parser of ``ucudnn`` and ``ucudnn-bench``: argparse, whose errors name the (sub)command that was
given and, for a mistyped option, the option meant.

Plain argparse reports an option a subcommand does not know with the top-level usage (``ucudnn: error:
unrecognized arguments: --worksapce``), because subcommands hand what they do not know back to it; and it suggests
nothing. Here the error comes from the subcommand that was running, with its usage, and says which of its options
is closest to each unknown one (``--worksapce: did you mean --workspace?``).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["Parser"]


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in action.choices.values()
    ]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose subparsers are Parsers too (argparse makes them of the parent's class)."""

    _given: list[str] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        self._forget()
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            self._running().error(f"unrecognized arguments: {' '.join(extras)}")
        return ns

    def error(self, message: str) -> NoReturn:
        hints = self._hints()
        if len(hints) == 1 and hints[0][0] in message:
            message += f" (did you mean {hints[0][1]}?)"
        elif hints:
            message += " (" + "; ".join(f"{name}: did you mean {meant}?" for name, meant in hints) + ")"
        super().error(message)

    def _forget(self) -> None:
        self._given = None
        for sub in _subparsers(self):
            if isinstance(sub, Parser):
                sub._forget()

    def _running(self) -> Parser:
        """The deepest subcommand parser that took part in the latest parse (this one if none did)."""
        for sub in _subparsers(self):
            if isinstance(sub, Parser) and sub._given is not None:
                return sub._running()
        return self

    def _hints(self) -> list[tuple[str, str]]:
        """``(--x, --y)`` for each option --x given to this parser that it does not know, where its own option --y is
        close. Scanning stops at ``--`` and at a subcommand's name (what follows is not ours)."""
        known = sorted(s for s in self._option_string_actions if s.startswith("--"))
        commands = {name for sub_action in self._actions if isinstance(sub_action, argparse._SubParsersAction)
                    for name in sub_action.choices}  # fmt: skip
        hints: list[tuple[str, str]] = []
        for token in self._given or []:
            if token == "--" or token in commands:
                break
            if not token.startswith("--") or len(token) < 3:
                continue
            name = token.split("=", 1)[0]
            if name in self._option_string_actions or sum(o.startswith(name) for o in known) == 1:
                continue  # known, or an abbreviation argparse accepts
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            if close:
                hints.append((name, close[0]))
        return hints
