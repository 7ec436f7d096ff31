"""Workspace Division end to end: a C "framework" (net_driver.c) trains three distinct layers -- nine kernels,
each queried, sized and run as a framework does it -- under UCUDNN_TOTAL_WORKSPACE_SIZE, with the host backend's
modelled timings and the real planner (the embedded one: a C host).

The layers (N = 16, float32 NCHW, stride 1): 32->32 channels 32x32 3x3; 16->32 16x16 5x5; 32->16 24x24 3x3. The
nine kernels' fastest plans need about 96 MiB of workspace together, so an 8 MiB budget really has to be divided.
One run under that budget (on a fresh cache) is shared by the tests; the others reuse its cache. Tolerance against
the run without the preload library: rtol 1e-4 with atol 1e-4 * max|reference|
(other algorithms sum in another order; the filter gradient is accumulated across micro-batches).
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ucudnn import _paths

from .conftest import RunDriver, base_env, compile_driver

N = 16
LAYERS = "32x32x32x3x1,16x32x16x5x2,32x16x24x3x1"
KERNELS = 9
MiB = 1024**2
BUDGET = 8 * MiB
OUTPUTS = ("y", "dx", "dw")


@pytest.fixture(scope="module")
def net_driver(host_lib: Path, preload_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail("the embedded planner (libucudnn_planner.so) is not built")
    return compile_driver("net_driver", tmp_path_factory)


def run_net(
    driver: Path, out: Path, *, db: Path | None = None, env: dict[str, str] | None = None, iters: int = 2
) -> dict[str, Any]:
    """One run; with `db` under the preload library (that cache), without it otherwise."""
    full = base_env()
    if db is not None:
        full["LD_PRELOAD"] = str(_paths.PRELOAD)
        full["UCUDNN_DATABASE"] = str(db)
    full.update(env or {})
    proc = subprocess.run(
        [str(driver), f"n={N}", f"layers={LAYERS}", f"iters={iters}", f"out={out}"],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    report["stderr"] = proc.stderr
    assert report["status"] == 0
    assert len(report["kernels"]) == KERNELS
    return report


def plans(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The plan each kernel ran in the last iteration, by kernel key."""
    out = {k["plan"]["key"]: k["plan"] for k in report["kernels"]}
    assert len(out) == KERNELS
    return out


def total_time(report: dict[str, Any]) -> float:
    return math.fsum(p["time_ms"] for p in plans(report).values())


def total_workspace(report: dict[str, Any]) -> int:
    return sum(p["workspace_bytes"] for p in plans(report).values())


def load(prefix: Path, layer: int, name: str) -> np.ndarray:
    return np.fromfile(f"{prefix}.{layer}.{name}", dtype=np.float32)


def assert_outputs_close(prefix: Path, reference: Path) -> None:
    for layer in range(3):
        for name in OUTPUTS:
            got, want = load(prefix, layer, name), load(reference, layer, name)
            atol = 1e-4 * float(np.abs(want).max())
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol, err_msg=f"layer {layer} {name}")


def wd(budget: int) -> dict[str, str]:
    return {"UCUDNN_TOTAL_WORKSPACE_SIZE": str(budget)}


def cli(*args: str, db: Path) -> str:
    env = base_env() | {"UCUDNN_DATABASE": str(db)}
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def bench_state(db: Path) -> tuple[int, float]:
    with sqlite3.connect(db) as conn:
        (rows,) = conn.execute("SELECT COUNT(*) FROM benchmarks").fetchone()
        (stamp,) = conn.execute("SELECT COALESCE(MAX(measured_at), 0) FROM benchmark_runs").fetchone()
    return int(rows), float(stamp)


@pytest.fixture(scope="module")
def reference(net_driver: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("ref") / "ref"
    run_net(net_driver, prefix)
    return prefix


@pytest.fixture(scope="module")
def divided(net_driver: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Path]:
    """The run under BUDGET on a fresh cache: its report, its cache and its output prefix."""
    tmp = tmp_path_factory.mktemp("wd")
    report = run_net(net_driver, tmp / "wd", db=tmp / "cache.sqlite", env=wd(BUDGET) | {"UCUDNN_LOG_LEVEL": "info"})
    return report, tmp / "cache.sqlite", tmp / "wd"


def test_division_runs_within_the_budget_with_undivided_results(
    divided: tuple[dict[str, Any], Path, Path], reference: Path
) -> None:
    report, _, prefix = divided
    assert_outputs_close(prefix, reference)
    stats = report["stats"]
    assert stats["passthrough"] == 0 and stats["planned"] == stats["calls"] == 2 * KERNELS
    assert stats["micro_batches"] > stats["calls"]  # micro-batching happened
    # One division per kernel joining; the plans in force use at most the budget, and exactly the division's.
    assert stats["divisions"] == KERNELS and stats["total_workspace_size"] == BUDGET
    division = stats["division"]
    assert division["kernels"] == KERNELS and division["budget_bytes"] == BUDGET
    assert total_workspace(report) == division["workspace_bytes"] <= BUDGET
    assert total_time(report) == pytest.approx(division["time_ms"], rel=1e-5)
    assert stats["clears"] >= 1  # earlier kernels gave up part of the budget to later ones
    for k in report["kernels"]:  # the "framework" was told, and used, each plan's workspace
        assert k["workspace"] == k["plan"]["workspace_bytes"]
        assert k["plan"]["source"] == "planner"


def test_log_line_at_info(divided: tuple[dict[str, Any], Path, Path]) -> None:
    lines = [ln for ln in divided[0]["stderr"].splitlines() if "workspace division over" in ln]
    assert len(lines) == KERNELS
    assert f"over {KERNELS} kernel(s)" in lines[-1] and f"of {BUDGET} bytes" in lines[-1]


def test_division_agrees_with_the_offline_ilp(divided: tuple[dict[str, Any], Path, Path], tmp_path: Path) -> None:
    report, db, _ = divided
    # The same measurements as a perf table for `ucudnn plan --total-workspace`.
    table = tmp_path / "table.json"
    cli("db", "export", "--perf-table", "--batch", str(N), str(table), db=db)
    assert len(json.loads(table.read_text())["kernels"]) == KERNELS
    offline = json.loads(cli("plan", "--table", str(table), "--total-workspace", str(BUDGET), "--json", db=db))
    assert offline["status"] == "optimal"
    ran = plans(report)
    assert total_time(report) == pytest.approx(offline["total_time_ms"], rel=1e-5)
    assert total_workspace(report) == offline["total_workspace_bytes"]
    for k in offline["kernels"]:
        plan = ran[k["name"]]
        assert plan["workspace_bytes"] == k["workspace_bytes"], k["name"]
        assert plan["time_ms"] == pytest.approx(k["time_ms"], rel=1e-5), k["name"]
        assert sorted((m["batch"], m["algo"]) for m in plan["micro_batches"]) == sorted(
            (m["batch"], m["algo"]) for m in k["micro_batches"]
        )


def test_budget_trades_time_between_zero_and_unlimited(
    net_driver: Path, divided: tuple[dict[str, Any], Path, Path], tmp_path: Path
) -> None:
    db = divided[1]
    runs = {
        name: run_net(net_driver, tmp_path / name, db=db, env=wd(b))
        for name, b in (("zero", 1), ("budget", BUDGET), ("unlimited", 1 << 40))
    }
    t = {name: total_time(r) for name, r in runs.items()}
    ws = {name: total_workspace(r) for name, r in runs.items()}
    assert ws["zero"] == 0
    assert ws["unlimited"] > BUDGET >= ws["budget"]  # the budget binds
    assert t["zero"] > t["budget"] > t["unlimited"]
    # Workspace Reuse with the same total split evenly: never better than the division.
    wr = run_net(net_driver, tmp_path / "wr", db=db, env={"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(BUDGET // KERNELS)})
    assert wr["stats"]["divisions"] == 0 and wr["stats"]["division"] is None
    assert total_workspace(wr) <= BUDGET
    assert t["budget"] <= total_time(wr) * (1 + 1e-6)
    print(
        f"\ntotal time (ms): zero {t['zero']:.6g}, WD {BUDGET} B {t['budget']:.6g} "
        f"(workspace {ws['budget']}), unlimited {t['unlimited']:.6g} (workspace {ws['unlimited']}), "
        f"WR {BUDGET // KERNELS} B/kernel {total_time(wr):.6g} (workspace {total_workspace(wr)})"
    )
    for key, plan in plans(runs["budget"]).items():
        print(f"  share {plan['workspace_bytes']:>9} B  {plan['time_ms']:.6g} ms  {key[:60]}")


def test_second_run_reuses_the_cache(
    net_driver: Path, divided: tuple[dict[str, Any], Path, Path], reference: Path, tmp_path: Path
) -> None:
    first, db, _ = divided
    state = bench_state(db)
    assert state[0] > 0
    second = run_net(net_driver, tmp_path / "second", db=db, env=wd(BUDGET) | {"UCUDNN_LOG_LEVEL": "debug"})
    assert bench_state(db) == state  # nothing measured again
    assert "benchmark of" not in second["stderr"]
    assert plans(second) == plans(first)
    assert second["stats"]["division"] == first["stats"]["division"]
    assert_outputs_close(tmp_path / "second", reference)


@pytest.mark.parametrize(("who", "planner_calls"), [("self", 1), ("other", 2)])
def test_plan_made_across_another_threads_clear_is_not_cached(
    run_driver: RunDriver, who: str, planner_calls: int
) -> None:
    # The first planner call clears the plans: from its own thread (a re-division by the planner itself: the plan
    # it returns is current, so it is cached) or from another thread (it may be stale: used once, planned again).
    got = run_driver(
        "op=bwd_data", "n=8", "ws=0", "algo=0", "planner=fixed", "plan=4:0,4:0", "repeat=3", f"clear={who}"
    )
    stats = got.report["stats"]
    assert got.returncode == 0 and stats["planned"] == 3 and stats["clears"] == 1
    assert stats["planner_calls"] == planner_calls
