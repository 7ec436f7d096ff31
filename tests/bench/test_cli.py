"""ucudnn-bench's command line: bad input, the cuda backend's refusal, and a model-timed end-to-end run.

Runs that load the native libraries go through subprocesses: loading the preload library is process-global.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import gpu_unavailable_reason
from ucudnn.bench.cli import main

DATA = Path(__file__).parent / "data"


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ucudnn.bench.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_list_suites_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-suites"]) == 0
    out = capsys.readouterr().out
    for name in ("quick", "alexnet", "vgg16", "resnet50"):
        assert name in out
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "model clock" in text and "perf_counter" in text and "CUDA events" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--suite", "lenet"], "unknown suite 'lenet'"),
        (["--quick", "--workspace", "64XB"], "--workspace='64XB'"),
        (["--quick", "--ops", "fwd,sideways"], "unknown op 'sideways'"),
        (["--quick", "--policy", "half"], "unknown policy 'half'"),
        (["--quick", "--batch", "0"], "--batch 0"),
        ([], "nothing to run"),
        (["--problems", "/nonexistent/problems.csv"], "cannot read"),
        (["--problems", str(DATA / "conv_problems_small.h"), "--set", "bogus"], "bogus"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert needle in capsys.readouterr().err


def test_malformed_row_exit_2_names_the_row(tmp_path: Path) -> None:
    header = "w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h"
    bad = write(tmp_path, "p.csv", f"{header}\n8,8,1,2,2,3,3,0,0,1,1\n8,8,1,2\n")
    r = run_cli("--problems", str(bad))
    assert r.returncode == 2
    assert f"{bad}:3" in r.stderr and "error" in r.stderr


def test_non_positive_output_exit_2(tmp_path: Path) -> None:
    bad = write(tmp_path, "p.csv", "layer,4,4,1,2,2,7,7,0,0,1,1\n")
    r = run_cli("--problems", str(bad))
    assert r.returncode == 2
    assert f"{bad}:1" in r.stderr and "output size" in r.stderr


def test_cuda_backend_refuses_without_gpu() -> None:
    if gpu_unavailable_reason() is None:
        pytest.skip("a GPU with CuPy is present: the refusal cannot be observed here")
    r = run_cli("--backend", "cuda", "--suite", "quick", "--ops", "fwd")
    assert r.returncode == 2, r.stderr
    assert "--backend cuda" in r.stderr and ("CuPy" in r.stderr or "GPU" in r.stderr)
    assert "Traceback" not in r.stderr


TINY = """label,w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h
cifar_conv3,8,8,32,8,64,5,5,2,2,1,1
cifar_conv2,16,16,32,6,32,5,5,2,2,1,1
"""

ROW_FIELDS = {
    "problem", "origin", "shape", "op", "limit_bytes", "policy", "status", "reason", "timing", "repeat",
    "undivided_algo", "undivided_workspace_bytes", "undivided_ms", "undivided_find_ms", "ceiling_algo",
    "ceiling_workspace_bytes", "ceiling_ms", "ucudnn_ms", "ucudnn_times_ms", "predicted_ms", "plan_workspace_bytes",
    "micro_batches", "planning_ms", "speedup", "predicted_speedup", "ceiling_speedup", "max_abs_error", "rel_error",
    "tolerance", "output_match", "passthrough_calls", "n", "w", "h", "c", "k",
}  # fmt: skip


def test_model_timed_run_agrees_with_plans(tmp_path: Path) -> None:
    problems = write(tmp_path, "tiny.csv", TINY)
    out_json, out_csv, db = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "cache.sqlite"
    args = [
        "--problems", str(problems), "--policy", "undivided,powerOfTwo,all", "--workspace", "16KiB,512KiB,2MiB",
        "--repeat", "2", "--host-timing", "model", "--json", str(out_json), "--csv", str(out_csv),
        "--database", str(db), "--progress", "none",
    ]  # fmt: skip
    r = run_cli(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "geomean" in r.stdout and "total run time" in r.stdout
    doc = json.loads(out_json.read_text())
    rows = doc["rows"]
    assert len(rows) == 2 * 3 * 3 * 3  # problems x ops x limits x policies
    assert doc["meta"]["timing"] == "model" and doc["summary"]
    ok = [row for row in rows if row["status"] == "ok"]
    assert len(ok) == len(rows), [row["reason"] for row in rows if row["status"] != "ok"]
    for row in ok:
        assert ROW_FIELDS <= set(row)
        assert row["output_match"], row
        assert row["passthrough_calls"] == 0, row
        assert row["plan_workspace_bytes"] <= row["limit_bytes"]
        assert sum(m["batch"] * m["count"] for m in row["micro_batches"]) == row["n"]
        # Model clock against the plan's prediction and Find's modelled time (float32 in the perf struct).
        assert math.isclose(row["ucudnn_ms"], row["predicted_ms"], rel_tol=1e-3), row
        assert math.isclose(row["undivided_ms"], row["undivided_find_ms"], rel_tol=1e-3), row
        assert math.isclose(row["speedup"], row["predicted_speedup"], rel_tol=2e-3), row
        if row["policy"] == "undivided":
            assert [m["batch"] for m in row["micro_batches"]] == [row["n"]]
            assert math.isclose(row["speedup"], 1.0, rel_tol=1e-3), row
    # Micro-batching must actually happen somewhere, and never lose against the undivided baseline.
    assert any(len(row["micro_batches"]) > 1 or row["micro_batches"][0]["count"] > 1 for row in ok)
    assert all(row["speedup"] >= 1 - 1e-3 for row in ok)
    with out_csv.open() as fh:
        assert len(list(csv.DictReader(fh))) == len(rows)
    assert db.exists() and db.stat().st_size > 0

    # A second run plans from the SQLite cache and gets the same plans.
    r2 = run_cli(*args)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    rows2 = json.loads(out_json.read_text())["rows"]
    assert [row["micro_batches"] for row in rows2] == [row["micro_batches"] for row in rows]


def test_unrunnable_problem_is_skipped_and_the_run_continues(tmp_path: Path) -> None:
    # Two terabytes of input: no allocation can hold it, so the problem is skipped with the reason.
    problems = write(tmp_path, "p.csv", "giant,64,64,64,2000000,8,3,3,1,1,1,1\nsmall,8,8,4,2,4,3,3,1,1,1,1\n")
    out_json = tmp_path / "r.json"
    r = run_cli(
        "--problems", str(problems), "--ops", "fwd", "--workspace", "1MiB", "--host-timing", "model",
        "--database", str(tmp_path / "db.sqlite"), "--json", str(out_json), "--progress", "none",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert [(row["problem"], row["status"]) for row in rows] == [("giant", "skipped"), ("small", "ok")]
    assert rows[0]["reason"]
    assert "skipped: giant" in r.stdout


def test_passthrough_is_never_credited_with_a_speedup(tmp_path: Path) -> None:
    """With the shim disabled every call passes through: the "ucudnn" run must use an algorithm that fits the
    limit (not v7's unlimited favourite), so each speedup is exactly 1 under the model clock, with no prediction."""
    problems = write(tmp_path, "tiny.csv", TINY)
    out_json = tmp_path / "r.json"
    args = [
        "--problems", str(problems), "--workspace", "16KiB,512KiB", "--repeat", "1", "--host-timing", "model",
        "--json", str(out_json), "--database", str(tmp_path / "cache.sqlite"), "--progress", "none",
    ]  # fmt: skip
    r = run_cli(*args, env={"UCUDNN_DISABLE": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert rows and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        assert row["passthrough_calls"] > 0 and row["micro_batches"] == [], row
        assert row["output_match"], row
        assert row["speedup"] == pytest.approx(1.0, rel=1e-9), row
        assert row["predicted_speedup"] is None, row
