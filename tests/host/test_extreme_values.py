"""Values at and past the limits of int and int64 in every descriptor, run on the host backend alone and under the
preload library: every call is answered with a status, the process lives, and the preload library changes no
answer. Random sequences of ``tests/realcudnn/_fuzz_cases.py`` (``extreme``), through the same probes as the
comparison with the real library, plus the workspace-size and ``Get*_v7`` queries of the three operations.

The real library is not asked: past 2**31 its answers follow 32-bit wraparound, which the host backend does not
emulate. What is asked is that nothing here overflows. Built with ``UCUDNN_BUILD_SANITIZE=undefined`` (`.ci/run`
runs these tiers so), every signed overflow, bad shift or out-of-bounds index ends the probe with a report: the
first runs found six, in the packed strides and span of a tensor, the output extent and layout checks of a graph
convolution, the packed-filter check of a graph's analysis, and the sizes of a problem built on descriptors a Set
had refused (docs/testing.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests._env import ROOT, project_pythonpath, run_case_probe
from tests.realcudnn._fuzz_cases import cases, legacy_cases
from ucudnn import _paths

SEED = int(os.environ.get("UCUDNN_TEST_FUZZ_SEED", "20261127"))
COUNT = int(os.environ.get("UCUDNN_TEST_FUZZ_CASES", "3000"))


def run(probe: str, batch: list[Any], *args: str, env: dict[str, str] | None = None) -> list[Any]:
    """The probe on the host backend, one JSON answer per case; it must exit 0."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "LD_PRELOAD"}
    child |= {"PYTHONPATH": project_pythonpath(os.environ), "UCUDNN_HOST_TIMING": "model", **(env or {})}
    return run_case_probe(f"tests.realcudnn.{probe}", _paths.HOST_CUDNN, batch, *args, env=child)


@pytest.fixture(scope="module")
def legacy_batch() -> list[Any]:
    if not _paths.HOST_CUDNN.exists():
        pytest.fail(f"the host backend is not built ({_paths.HOST_CUDNN}): run `pip install -e .`", pytrace=False)
    return legacy_cases(SEED, COUNT, extreme=True)


def test_legacy_calls_at_the_limits_of_int_are_answered(legacy_batch: list[Any]) -> None:
    results = run("legacy_fuzz_probe", legacy_batch, "all")
    assert all(None not in result for result in results)
    queried = [result[-1] for result in results if isinstance(result[-1], list) and result[-1][:1] == [0]]
    sizes = [item[1] for q in queried for item in q[1:] if isinstance(item, list) and item[0] == 0]
    # The queries reach the workspace computations, and some of those sizes pass 2**31 bytes.
    assert len(queried) > COUNT // 20 and len(sizes) > COUNT // 4 and any(s > 2**31 for s in sizes)


def test_graph_sequences_at_the_limits_of_int64_are_answered_and_the_preload_library_changes_nothing() -> None:
    batch = cases(SEED, COUNT, extreme=True)
    alone = run("fuzz_probe", batch)
    under = run("fuzz_probe", batch, env={"LD_PRELOAD": str(_paths.PRELOAD)})
    assert under == alone
    # Both outcomes are reached: the descriptor each case builds (its last part: creation, then one answer per
    # step) finalizes in some cases and is refused in others.
    finalized = [a[-1][1 + c["steps"].index(["finalize"])] == 0 for c, a in zip(batch, alone, strict=True)]
    assert COUNT // 20 < sum(finalized) < COUNT - COUNT // 20


def test_the_preload_library_plans_legacy_calls_at_the_limits(legacy_batch: list[Any], tmp_path: Any) -> None:
    """Under a 1 MiB limit every query is planned or passed through; none fails the planner (a plan of more
    micro-batches than the shim holds did, at N = 65536)."""
    stats = tmp_path / "stats.json"
    env = {"LD_PRELOAD": str(_paths.PRELOAD), "UCUDNN_DEFAULT_WORKSPACE_LIMIT": "1MiB",
           "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite"), "UCUDNN_STATS_FILE": str(stats)}  # fmt: skip
    results = run("legacy_fuzz_probe", legacy_batch, "all", env=env)
    assert all(None not in result for result in results)
    counters = json.loads(stats.read_text())
    assert counters["planner_calls"] > COUNT // 10, counters
    assert counters["planner_errors"] == 0 and counters["rejected_plans"] == 0, counters


def test_graphs_as_large_as_a_tensor_may_be_are_planned_or_refused() -> None:
    """Engines 0-7 on the largest square images, 200 random convolutions whose operands stay below 2**31 elements
    and some of any 64-bit sizes: the plans' workspaces pass 2**40 bytes, and a product of such sizes must not
    overflow (the layout check of a filter did, sanitized)."""
    proc = subprocess.run([sys.executable, "-m", "tests.host.extreme_graph_probe", str(SEED), "200"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": project_pythonpath(os.environ)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["built"] > 200 and result["refused"] > 200 and result["largest_workspace"] > 2**40, result
    # The heuristics rank exactly the engines a plan can be built from, each by its modelled time (FFT_TILING's
    # over a million tiles on the largest images).
    assert result["ranked"] == result["built"], result
