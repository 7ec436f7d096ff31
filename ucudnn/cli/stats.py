"""``ucudnn stats FILE``: a run's stats file (``ucudnn run --stats-file``, ``UCUDNN_STATS_FILE``) read out, each
counter with what it counts (``ucudnn.counters``): those that moved, or all with ``--all``.

A field this version does not know (a file from another version of ucudnn) is shown as such, never dropped. Exit
status 0, or 2 where the file is missing or is not a stats file (a one-line message on stderr); the file is only
read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ucudnn import counters
from ucudnn.cli._files import BadJson, read_json

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "stats",
        help="read out a run's stats file, each counter with its meaning",
        description="Read out the stats file a run wrote (ucudnn run --stats-file F, UCUDNN_STATS_FILE): the "
        "counters that moved, each with what it counts.",
    )
    p.add_argument("file", metavar="FILE", type=Path, help="the stats file (JSON)")
    p.add_argument("--all", action="store_true", help="also the counters that are 0")
    p.set_defaults(func=run)


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    try:
        data = read_json(str(path), "a ucudnn stats file")
    except BadJson as exc:
        raise ValueError(f"{path}: not a ucudnn stats file ({exc})") from None
    if not isinstance(data, dict) or not any(name in data for name in counters.COUNTERS):
        raise ValueError(f"{path}: not a ucudnn stats file (no counter in it)")
    return data


def _plain(text: str) -> str:
    return text.replace("`", "")


def lines(data: dict[str, Any], everything: bool = False) -> list[str]:
    """The read-out of one stats file's fields: the state first, then the counters in the list's order."""
    real = data.get("real_library") or "(not resolved)"
    out = [f"process {data.get('pid', '?')}; real library {real} (version {data.get('real_version', 0)})"]
    if data.get("disabled"):
        out.append("disabled: every call passed through (UCUDNN_DISABLE, or a bad setting)")
    d = data.get("division")
    if isinstance(d, dict):
        out.append(f"workspace division: {d.get('kernels')} kernel(s), {d.get('workspace_bytes')} of "
                   f"{d.get('budget_bytes')} bytes, {d.get('time_ms')} ms predicted")  # fmt: skip
    width = max(len(name) for name in counters.COUNTERS)
    for name, meaning in counters.COUNTERS.items():
        value = data.get(name)
        if value is None or (not value and not everything):
            continue
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        out.append(f"{name:<{width}} {shown:>14}  {_plain(meaning)}")
    out += [f"{name:<{width}} {data[name]!s:>14}  (not known to this version of ucudnn)"
            for name in counters.unknown(data)]  # fmt: skip
    return out


def run(args: argparse.Namespace) -> int:
    try:
        data = _load(args.file)
    except ValueError as exc:
        print(f"ucudnn stats: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print("\n".join(lines(data, args.all)))
    return EXIT_OK
