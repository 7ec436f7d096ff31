"""The ``ucudnn`` command: one subcommand per module in this package.

Each subcommand module exposes ``register(subparsers) -> None``, which adds its parser and sets ``func`` (a
callable taking the parsed namespace and returning the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ucudnn import __version__
from ucudnn.cli._parser import Parser

# Subcommand modules, in the order `ucudnn --help` lists them.
COMMANDS: tuple[str, ...] = ("paths", "plan", "db", "run", "stats")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ucudnn", description="Micro-batched cuDNN convolutions.")
    parser.add_argument("--version", action="version", version=f"ucudnn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"ucudnn.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
