"""ucudnn-bench's command line: bad input, the cuda backend's refusal, and a model-timed end-to-end run.

Runs that load the native libraries go through subprocesses: loading the preload library is process-global.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    assert "--calls-per-sample" in text and "synchronous" in text and "UCUDNN_VERIFY_SAMPLES" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--suite", "lenet"], "unknown suite 'lenet'"),
        (["--quick", "--workspace", "64XB"], "--workspace='64XB'"),
        (["--quick", "--ops", "fwd,sideways"], "unknown op 'sideways'"),
        (["--quick", "--policy", "half"], "unknown policy 'half'"),
        (["--quick", "--batch", "0"], "--batch 0"),
        (["--quick", "--calls-per-sample", "0"], "--calls-per-sample 0"),
        ([], "nothing to run"),
        (["--problems", "/nonexistent/problems.csv"], "cannot read"),
        (["--problems", str(DATA / "conv_problems_small.h"), "--set", "bogus"], "bogus"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert needle in capsys.readouterr().err


def test_plot_without_matplotlib_fails_before_running(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert main(["--quick", "--plot", str(tmp_path / "s.png"), "--progress", "lines"]) == 2
    out = capsys.readouterr()
    assert "--plot needs matplotlib" in out.err and "nothing was run" in out.err
    assert "[1/" not in out.err and out.out == ""  # no progress, no summary: nothing ran


def test_a_suite_run_says_what_its_labels_mean() -> None:
    from ucudnn.bench.cli import build_parser, select_problems

    problems, source, legend = select_problems(build_parser().parse_args(["--quick"]))
    assert source == "suite quick" and "alexnet_conv5/4" in {p.label for p in problems}
    assert "alexnet_conv5/4: AlexNet's conv5" in legend and "quarter of its channels" in legend
    assert select_problems(build_parser().parse_args(["--problems", str(DATA / "conv_problems_small.h")]))[2] == ""


def test_bad_verify_samples_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The warm-up through the shim depends on it, so a value the shim would reject is refused before any run.
    monkeypatch.setenv("UCUDNN_VERIFY_SAMPLES", "three")
    assert main(["--quick", "--progress", "none"]) == 2
    assert "UCUDNN_VERIFY_SAMPLES" in capsys.readouterr().err


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
    "tolerance", "output_match", "passthrough_calls", "n", "w", "h", "c", "k", "calls_per_sample",
    "undivided_host_us_per_call", "ucudnn_host_us_per_call", "verified", "rejected_by_measurement",
}  # fmt: skip


def own_call(row: dict[str, Any]) -> bool:
    """The row's executed plan is cuDNN's own call: one micro-batch of N with the undivided algorithm."""
    return [(m["batch"], m["algo_name"], m["count"]) for m in row["micro_batches"]] == [
        (row["n"], row["undivided_algo"], 1)
    ]


def micro_batched(row: dict[str, Any]) -> bool:
    return bool(sum(m["count"] for m in row["micro_batches"]) > 1)


def assert_host_times(row: dict[str, Any]) -> None:
    for key in ("undivided_host_us_per_call", "ucudnn_host_us_per_call"):
        assert row[key] is not None and 0 < row[key] < 60e6, (key, row)


def test_model_timed_run_agrees_with_plans(tmp_path: Path) -> None:
    problems = write(tmp_path, "tiny.csv", TINY)
    out_json, out_csv, db = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "new" / "cache.sqlite"
    args = [
        "--problems", str(problems), "--policy", "undivided,powerOfTwo,all", "--workspace", "16KiB,512KiB,2MiB",
        "--host-timing", "model", "--json", str(out_json), "--csv", str(out_csv), "--database", str(db),
        "--progress", "none",
    ]  # fmt: skip
    r = run_cli(*args, "--repeat", "1", "--calls-per-sample", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "geomean" in r.stdout and "total run time" in r.stdout
    # Where everything went, and the library's version as a release.
    assert f"wrote {out_json} " in r.stdout and f"wrote {out_csv} " in r.stdout and f"cache: {db} " in r.stdout
    assert "host backend implementing cuDNN 9." in r.stdout and "API" not in r.stdout
    assert f"ucudnn-bench: created directory {db.parent}\n" in r.stderr  # said once: not by the second run below
    assert "convolution call(s)" not in r.stderr  # the preload library's exit summary: the bench reports its own
    doc = json.loads(out_json.read_text())
    rows = doc["rows"]
    assert len(rows) == 2 * 3 * 3 * 3  # problems x ops x limits x policies
    assert doc["meta"]["timing"] == "model" and doc["summary"]
    assert doc["meta"]["calls_per_sample"] == 2 and doc["meta"]["verify_samples"] == 3
    ok = [row for row in rows if row["status"] == "ok"]
    assert len(ok) == len(rows), [row["reason"] for row in rows if row["status"] != "ok"]
    for row in ok:
        assert ROW_FIELDS <= set(row)
        assert row["calls_per_sample"] == 2 and len(row["ucudnn_times_ms"]) == 1, row
        assert_host_times(row)
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
    # New micro-batched plans were checked on real executions during the warm-up, and what the timed samples saw
    # (each ucudnn_ms == predicted_ms above) is the kept plan, not an alternation with the undivided choice.
    assert any(row["verified"] for row in ok)
    with out_csv.open() as fh:
        got = list(csv.DictReader(fh))
    assert len(got) == len(rows) and float(got[0]["ucudnn_host_us_per_call"]) > 0
    assert db.exists() and db.stat().st_size > 0

    # A second run plans from the SQLite cache and gets the same plans; one call per sample (the host default)
    # gives the same per-call model times as two.
    r2 = run_cli(*args, "--repeat", "2")
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert "created directory" not in r2.stderr
    rows2 = json.loads(out_json.read_text())["rows"]
    assert [row["micro_batches"] for row in rows2] == [row["micro_batches"] for row in rows]
    assert all(row["calls_per_sample"] == 1 and len(row["ucudnn_times_ms"]) == 2 for row in rows2)
    for one, two in zip(rows2, rows, strict=True):
        assert math.isclose(one["ucudnn_ms"], two["ucudnn_ms"], rel_tol=1e-9), (one, two)
        assert math.isclose(one["undivided_ms"], two["undivided_ms"], rel_tol=1e-9), (one, two)


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


@pytest.mark.parametrize("shim", ["disabled", "planning"])
def test_cudnns_own_call_comes_out_at_1x(tmp_path: Path, shim: str) -> None:
    """A row that runs exactly cuDNN's own call is timed at 1.00x, with several calls per sample.

    disabled: every call passes through; the "ucudnn" run must use an algorithm that fits the limit (not v7's
    unlimited favourite), and it is never credited with a speedup or a prediction. planning: rows whose plan is one
    micro-batch with the undivided algorithm; micro-batched rows in the same run take exactly their prediction.
    Under the model clock both are exact: a timed sample that ran anything else (a different algorithm, a check's
    alternation with the undivided choice, calls not divided out) shows.
    """
    problems = write(tmp_path, "tiny.csv", TINY)
    out_json = tmp_path / "r.json"
    args = [
        "--problems", str(problems), "--workspace", "16KiB,512KiB", "--repeat", "1", "--host-timing", "model",
        "--calls-per-sample", "3", "--json", str(out_json), "--database", str(tmp_path / "cache.sqlite"),
        "--progress", "none", "--policy", "powerOfTwo" if shim == "disabled" else "undivided,powerOfTwo",
    ]  # fmt: skip
    r = run_cli(*args, env={"UCUDNN_DISABLE": "1" if shim == "disabled" else "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert rows and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        assert row["output_match"] and row["calls_per_sample"] == 3, row
        assert_host_times(row)
        if shim == "disabled":
            assert row["passthrough_calls"] > 0 and row["micro_batches"] == [], row
            assert row["predicted_speedup"] is None and not row["verified"], row
            assert row["own_call"] and abs(row["speedup"] - 1.0) <= 1e-6, row
        else:
            assert row["passthrough_calls"] == 0 and row["own_call"] == own_call(row), row
            if own_call(row):
                assert abs(row["speedup"] - 1.0) <= 1e-6, row
            else:  # float32 Find times in the prediction
                assert micro_batched(row) and math.isclose(row["ucudnn_ms"], row["predicted_ms"], rel_tol=1e-5), row
    if shim == "planning":
        assert any(own_call(row) for row in rows) and any(micro_batched(row) for row in rows)


# A layer whose backward-filter ALGO_1 needs a workspace growing with N: at 8028160 bytes it fits micro-batches of
# 4 only. Find reports ALGO_1 twice as fast as it runs, so the planner prefers 4 x b4 ALGO_1 to one call of
# ALGO_3, which is really faster (tests/preload/test_never_slower.py).
SKEWED = "label,w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h\nskewed,28,28,64,16,64,3,3,1,1,1,1\n"


def test_a_plan_replaced_by_its_check_is_timed_as_the_kept_choice(tmp_path: Path) -> None:
    problems = write(tmp_path, "skewed.csv", SKEWED)
    out_json = tmp_path / "r.json"
    r = run_cli(
        "--problems", str(problems), "--ops", "bwd-filter", "--workspace", "8028160", "--repeat", "2",
        "--host-timing", "model", "--json", str(out_json), "--database", str(tmp_path / "cache.sqlite"),
        "--progress", "none", "-v",
        env={"UCUDNN_HOST_FIND_SKEW": "bwd_filter:1:0.5", "UCUDNN_VERIFY_SAMPLES": "3"},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads(out_json.read_text())["rows"]
    assert row["verified"] and row["rejected_by_measurement"], row
    # The plan read back is the kept one, the undivided ALGO_3: cuDNN's own call, so exactly 1x. Had a timed
    # sample still been part of the check, it would have alternated with the slower 4 x b4 ALGO_1.
    assert row["micro_batches"] == [{"batch": 16, "algo": 3, "algo_name": "ALGO_3", "count": 1}], row
    assert own_call(row) and row["own_call"] and abs(row["speedup"] - 1.0) <= 1e-6, row
    assert math.isclose(row["ucudnn_ms"], row["predicted_ms"], rel_tol=1e-5), row
    assert row["output_match"], row
    assert "plan replaced by the undivided choice" in r.stdout and "1 replaced" in r.stdout


def test_the_host_path_never_imports_cupy(tmp_path: Path) -> None:
    problems = write(tmp_path, "p.csv", "small,8,8,4,2,4,3,3,1,1,1,1\n")
    code = (
        "import sys\nfrom ucudnn.bench.cli import main\n"
        f"rc = main(['--problems', {str(problems)!r}, '--ops', 'fwd', '--workspace', '1MiB', '--host-timing', "
        f"'model', '--database', {str(tmp_path / 'db.sqlite')!r}, '--progress', 'none'])\n"
        "assert 'cupy' not in sys.modules, 'the host path imported CuPy'\nsys.exit(rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_graph_api_rows_split_the_fastest_engine_within_the_limit(tmp_path: Path) -> None:
    """--api graph: each row plans the fastest engine through the preload library's graph hooks; the shim splits
    it to fit the limit (or the row falls back to the best engine that fits), and the output matches."""
    problems = write(tmp_path, "tiny.csv", TINY)
    out_json = tmp_path / "r.json"
    r = run_cli(
        "--problems", str(problems), "--api", "graph", "--workspace", "16KiB,512KiB,2MiB",
        "--policy", "undivided,powerOfTwo", "--host-timing", "model", "--repeat", "1", "--json", str(out_json),
        "--database", str(tmp_path / "cache.sqlite"), "--progress", "none",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out_json.read_text())["rows"]
    ok = [row for row in rows if row["status"] == "ok"]
    assert len(ok) == len(rows) == 2 * 3 * 3 * 2, [row["reason"] for row in rows if row["status"] != "ok"]
    for row in ok:
        assert row["output_match"], row
        assert row["plan_workspace_bytes"] <= row["limit_bytes"], row
        assert sum(m["batch"] * m["count"] for m in row["micro_batches"]) == row["n"], row
        assert "did not take the graph" not in row["reason"], row
        if row["policy"] == "undivided":
            assert [m["count"] for m in row["micro_batches"]] == [1], row
    split = [row for row in ok if len(row["micro_batches"]) > 1 or row["micro_batches"][0]["count"] > 1]
    assert split and all(row["policy"] == "powerOfTwo" for row in split)
    # The split fastest engine beats the best engine that fits wherever it splits (modelled times).
    assert all(row["speedup"] > 1.0 for row in split), [(row["speedup"], row["micro_batches"]) for row in split]


def test_a_terminated_run_writes_the_rows_it_measured(tmp_path: Path) -> None:
    """SIGTERM (``timeout``, a scheduler) after the first problem: the rows measured so far are reported and
    written, marked partial, and the exit status says the run was interrupted (130)."""
    # Many problems, so that the run cannot finish before the signal reaches it on a loaded machine.
    rows_in = "\n".join(f"{8 + i % 12},{8 + i // 12},4,8,4,3,3,1,1,1,1" for i in range(60))
    problems = write(tmp_path, "many.csv", rows_in + "\n")
    out_json = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ucudnn.bench.cli", "--problems", str(problems), "--workspace", "16KiB",
         "--host-timing", "model", "--repeat", "1", "--json", str(out_json), "--database",
         str(tmp_path / "cache.sqlite"), "--progress", "lines"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # progress lines: "[k/180] ..." before problem k's first op
        if line.startswith("ucudnn-bench: [4/"):
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 130, out + err
    assert "interrupted; reporting and writing the" in err
    doc = json.loads(out_json.read_text())
    assert doc["meta"]["partial"] is True
    assert 3 <= len(doc["rows"]) < 180 and all(r["status"] == "ok" for r in doc["rows"])
    assert "interrupted after" in out


def test_the_last_line_says_whether_the_cache_was_written(tmp_path: Path) -> None:
    """Was: "a second run plans from it" also when the planner could not open the cache and planned in memory."""
    problems = write(tmp_path, "tiny.csv", "\n".join(TINY.splitlines()[:2]) + "\n")
    args = ["--problems", str(problems), "--ops", "fwd", "--workspace", "16KiB", "--host-timing", "model",
            "--repeat", "1", "--progress", "none"]  # fmt: skip
    (tmp_path / "a-file").write_text("not a directory\n")
    unusable = tmp_path / "a-file" / "cache.sqlite"
    r = run_cli(*args, env={"UCUDNN_DATABASE": str(unusable)})
    assert r.returncode == 0, r.stdout + r.stderr
    (last,) = [ln for ln in r.stdout.splitlines() if ln.startswith("cache: ")]
    assert last.startswith(f"cache: {unusable} was not written (") and "a second run measures them again" in last
    assert "a second run plans from it" not in r.stdout
    # Given as --database, the same path is refused before anything runs.
    r = run_cli(*args, "--database", str(unusable))
    assert r.returncode == 2 and "Not a directory" in r.stderr and "geomean" not in r.stdout
    good = tmp_path / "cache.sqlite"
    r = run_cli(*args, "--database", str(good))
    assert r.returncode == 0 and f"cache: {good} (benchmarks and plans; a second run plans from it" in r.stdout


def test_the_last_line_says_what_other_processes_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs started together on one cache measure the sizes of their kernels between them
    (docs/how-it-works.md, "Ranks share their benchmarks"); each says what it read from the other."""
    from types import SimpleNamespace

    from ucudnn._planner_sharing import SharedBenchmarks
    from ucudnn.bench import cli

    db = tmp_path / "cache.sqlite"
    for shared, said in [
        (None, None),  # nothing planned
        (SharedBenchmarks(), None),  # alone on the cache
        (SharedBenchmarks(7, 0, 2.04), "; 7 benchmark(s) measured by other processes planning the same kernels, "
                                       "2.0 s waited for them"),
        (SharedBenchmarks(1, 2, 61.0), ", 2 claimed by them measured here after all (UCUDNN_BENCHMARK_WAIT)"),
    ]:  # fmt: skip
        runtime = SimpleNamespace(cache_not_written=lambda: None, shared_benchmarks=lambda s=shared: s)
        monkeypatch.setitem(sys.modules, "ucudnn._runtime", runtime)
        line = cli._cache_line(db)
        assert line.startswith(f"cache: {db} (benchmarks and plans; a second run plans from it")
        assert ("measured by other processes" in line) == (said is not None) and (said is None or said in line)


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_database_is_the_default_never_a_file_named_by_blanks(tmp_path: Path, blank: str) -> None:
    problems = write(tmp_path, "tiny.csv", "\n".join(TINY.splitlines()[:2]) + "\n")
    home = tmp_path / "home"
    r = subprocess.run(
        [sys.executable, "-m", "ucudnn.bench.cli", "--problems", str(problems), "--ops", "fwd", "--workspace",
         "16KiB", "--host-timing", "model", "--repeat", "1", "--progress", "none", f"--database={blank}"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "UCUDNN_DATABASE"} | {"XDG_CACHE_HOME": str(home)},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    default = home / "ucudnn" / "cache.sqlite"
    assert default.is_file() and f"cache: {default} " in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "tiny.csv"]


@pytest.mark.parametrize(
    ("op", "skew", "fast"), [("fwd", "fwd:7:0.5", "GEMM"), ("bwd-data", "bwd_data:5:0.5", "ALGO_1")]
)
def test_no_row_is_slower_than_cudnn_alone_when_find_flatters_a_split(
    tmp_path: Path, op: str, skew: str, fast: str
) -> None:
    """Find reports Winograd twice as fast as it runs (model clock: every figure exact). At 8 MiB the planner then
    prefers 2 x 16 Winograd (4.9 MB) to undivided `fast`, which fits 8 MiB but not 4.9 MB, and runs faster.
    Was: the split was checked only against the best undivided algorithm within its own 4.9 MB (far slower) and
    kept, or not checked at all with the verdict of the 4 MiB row: the 8 MiB row ran at 0.73x. Now Get*_v7 reports
    the split's workspace with room for `fast`, its check times the two, and `fast` runs."""
    problems = write(tmp_path, "s14.csv", "s14,14,14,32,32,64,3,3,1,1,1,1\n")
    out = tmp_path / "r.json"
    r = run_cli("--problems", str(problems), "--ops", op, "--workspace", "4MiB,8MiB", "--host-timing", "model",
                "--repeat", "1", "--json", str(out), "--database", str(tmp_path / "c.sqlite"), "--progress", "none",
                env={"UCUDNN_HOST_FIND_SKEW": skew, "UCUDNN_VERIFY_SAMPLES": "3"})  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert all(row["speedup"] >= 1 - 1e-3 for row in rows), [(row["limit_bytes"], row["speedup"]) for row in rows]
    at8 = rows[1]
    assert at8["undivided_algo"] == fast and at8["verified"] and at8["rejected_by_measurement"], at8
    assert [(m["count"], m["batch"], m["algo_name"]) for m in at8["micro_batches"]] == [(1, 32, fast)]
