"""``python -m ucudnn.bench.dlsym_overhead`` runs end to end: its program really gets the hook for the hooked lookup
under the preload library and cuDNN's own function alone (it fails otherwise), and prints finite figures."""

from __future__ import annotations

import json
import math
import platform
import subprocess
import sys

import pytest

from ucudnn.bench.dlsym_overhead import KINDS


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the preload library interposes dlsym on x86-64 only")
def test_dlsym_overhead_measures_every_kind_side_by_side() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.bench.dlsym_overhead", "--runs", "2", "--iters", "2000", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert figures["runs"] == 2 and set(figures) == {"runs", "iters", *KINDS}
    for kind in KINDS:
        row = figures[kind]
        assert len(row["per_run"]) == 2
        # Timings on a shared machine: finite figures only; their size is the benchmark's to report.
        assert all(math.isfinite(v) and v > 0 for pair in row["per_run"] for v in pair)
        assert math.isfinite(row["difference_ns"])
