"""``python -m ucudnn.bench.graph_overhead`` runs end to end: its child process really builds, passes through and
splits a graph plan (it fails when the split plan did not run as two micro-batches), and prints finite figures."""

from __future__ import annotations

import json
import math
import subprocess
import sys


def test_graph_overhead_measures_all_three_paths() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.bench.graph_overhead", "--rounds", "1", "--iters", "200", "--json",
         "--live-plans", "1,50"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert set(figures) == {"build", "execute", "execute_split_per_part", "live", "heuristics", "heuristics_torch",
                            "step_us", "step_us_direct", "step_ratio"}  # fmt: skip
    # The live-plans axis: both counts, both figures.
    live = figures.pop("live")
    assert set(live) == {"1", "50"} and all(set(v) == {"execute", "pack_cycle"} for v in live.values())
    # Timings on a shared machine: finite figures only; their size is the benchmark's to report, not a test's.
    assert all(math.isfinite(v) for v in figures.values())
    assert all(math.isfinite(x) for v in live.values() for x in v.values())
