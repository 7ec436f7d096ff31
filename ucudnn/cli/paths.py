"""``ucudnn paths``: where the native artifacts are (for LD_PRELOAD lines and scripts)."""

from __future__ import annotations

import argparse
import json

from ucudnn import _paths


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("paths", help="print the paths of the built native libraries")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    found = _paths.artifacts()
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True))
    else:
        for key, value in sorted(found.items()):
            print(f"{key}: {value}")
    return 0
