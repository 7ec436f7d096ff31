"""The counters' one list (``shim/core/uc_stats.def``), as Python reads it (``ucudnn.counters``): every counter has
a meaning, and the reports that read counters by name ask only for names the library writes (``.get(name, 0)``
would read a misspelt name as 0, silently). That the library's stats JSON holds exactly these fields is
``tests/preload/test_example_run.py``'s to show, on a real run."""

from __future__ import annotations

import re

import pytest

from tests._env import ROOT
from ucudnn import counters

# The modules that read the library's counters by name, and the ways they do: a stats dict (`s`, `stats`,
# `r.stats`, `bridge.stats()`, `before`, `after`) indexed or asked `.get`, runner.py's `_count(stats, name)` and
# `_settle_check(..., name)`.
READERS = ("bench/torch_train.py", "bench/torch_worker.py", "bench/runner.py", "bench/graph_overhead.py")
_READS = (
    re.compile(r"""(?:\bs|\bstats|\.stats(?:\(\))?|\bbefore|\bafter)(?:\.get\(|\[)\s*["'](\w+)["']"""),
    re.compile(r"""\b_count\(\s*[\w.]+(?:\(\))?\s*,\s*["'](\w+)["']"""),
    re.compile(r"""\b_settle_check\([^)]*?["'](\w+)["']\s*\)"""),
    re.compile(r"""\b_counter\(\s*["'](\w+)["']\s*\)"""),  # torch_train's report lines
)


def test_every_counter_has_a_name_and_a_meaning() -> None:
    assert len(counters.COUNTERS) >= 60
    for name, doc in counters.COUNTERS.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name) and len(doc) > 10, (name, doc)
    assert "predicted_ms" in counters.COUNTERS and "predicted_ns" not in counters.COUNTERS  # UC_STAT_MS's name
    assert not set(counters.COUNTERS) & set(counters.STATE)


def test_unknown_names_the_keys_that_are_not_there() -> None:
    assert counters.unknown(["calls", "pid", "divided_cals", "graph_builds"]) == ["divided_cals"]


@pytest.mark.parametrize("reader", READERS)
def test_the_reports_read_only_counters_the_library_writes(reader: str) -> None:
    text = (ROOT / reader).read_text(encoding="utf-8")
    names = {name for read in _READS for name in read.findall(text)}
    assert names, f"{reader}: no counter read by name found (has the way it reads them changed?)"
    assert counters.unknown(names) == [], reader


def test_torch_train_s_table_columns_are_counters() -> None:
    from ucudnn.bench import torch_train

    names = {name for columns in torch_train._COUNTERS.values() for name in columns if name}
    assert len(names) == 7 and counters.unknown(names) == [], names
