"""``ucudnn paths``: where the native artifacts and headers are (for LD_PRELOAD lines, scripts and C builds)."""

from __future__ import annotations

import argparse
import json
import sys

from ucudnn import _paths


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("paths", help="print the paths of the built native libraries")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true", help="print a JSON object")
    how.add_argument("--cflags", action="store_true", help="print the compiler flags of a program using the headers")
    how.add_argument("--libs", action="store_true", help="print the linker flags of a program using the host backend")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.cflags or args.libs:
        try:
            print(_paths.cflags() if args.cflags else _paths.libs())
        except _paths.NotBuiltError as exc:
            print(exc, file=sys.stderr)
            return 2
        return 0
    found = _paths.artifacts()
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True))
    else:
        for key, value in sorted(found.items()):
            print(f"{key}: {value}")
    return 0
