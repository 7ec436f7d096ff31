"""The preload library's counters: what the stats JSON (``ucudnn run --stats-file``, ``UCUDNN_STATS_FILE``,
``ucudnn_stats_json``) holds, with the meaning of each field.

The counters come from the one list ``shim/core/uc_stats.def``, through the generated ``ucudnn._abi``; the table
of counters in docs/exit-summary.md is rendered from it (``python -m ucudnn.counters --markdown``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Final

from ._abi import STATS

#: The counters, by their names in the stats JSON: what each counts.
COUNTERS: Final[Mapping[str, str]] = STATS

#: The stats JSON's fields that are not counters: what the library reports of its state.
STATE: Final[Mapping[str, str]] = {
    "plan_cache_entries": "legacy plans held in the process's plan table now (bounded)",
    "division": "the network-wide workspace division last set (`kernels`, `budget_bytes`, `workspace_bytes`, "
    "`time_ms`), or null",
    "total_workspace_size": "the network-wide workspace budget, `UCUDNN_TOTAL_WORKSPACE_SIZE` or as set since "
    "(bytes; 0: off)",
    "disabled": "whether the library passes every call through (`UCUDNN_DISABLE`, or a bad setting)",
    "real_version": "`cudnnGetVersion` of the real library (0: not resolved)",
    "real_library": "the path of the real library the calls go to",
    "pid": "the process the stats are of",
}


def unknown(keys: Iterable[str]) -> list[str]:
    """Those of ``keys`` that are neither a counter nor a state field (a misspelt name reads as missing, not 0)."""
    return sorted(k for k in keys if k not in COUNTERS and k not in STATE)


def markdown_table() -> str:
    """The table of counters of docs/exit-summary.md."""
    rows = ["| field | meaning |", "|---|---|"]
    rows += [f"| `{name}` | {doc} |" for name, doc in COUNTERS.items()]
    rows += [f"| `{name}` | {doc} |" for name, doc in STATE.items()]
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m ucudnn.counters --markdown")
    print(markdown_table())
