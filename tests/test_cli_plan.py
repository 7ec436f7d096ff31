"""``ucudnn plan`` end to end, as a user runs it (a subprocess per call)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_native_output_diverted

LAUNCH = "import sys; from ucudnn.cli import main; sys.exit(main())"


def ucudnn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True, timeout=120)


def two_algo_kernel(name: str = "conv2.fwd", batch: int = 128) -> dict[str, Any]:
    """Fast algo 1 (1 ms + 0.1 ms/sample, 1 KiB/sample of workspace), slow algo 0 (1 ms/sample, 16 bytes)."""
    ms = []
    b = 1
    while b <= batch:
        ms.append(
            {
                "batch": b,
                "algo": 1,
                "time_ms": 1.0 + 0.1 * b,
                "workspace_bytes": 1024 * b,
                "determinism": False,
                "math_type": 1,
            }
        )
        ms.append({"batch": b, "algo": 0, "time_ms": 1.0 * b, "workspace_bytes": 16})
        b *= 2
    return {"name": name, "batch": batch, "measurements": ms}


def write(tmp_path: Path, doc: object, name: str = "table.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(path)


@pytest.fixture
def table(tmp_path: Path) -> str:
    return write(tmp_path, {"kernels": [two_algo_kernel()]})


def test_reuse_json_gives_the_hand_computed_plan(table: str) -> None:
    r = ucudnn("plan", "--table", table, "--batch", "128", "--workspace", "32KiB", "--policy", "powerOfTwo", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["name"] == "conv2.fwd" and out["status"] == "optimal"
    assert [(m["batch"], m["algo"]) for m in out["micro_batches"]] == [(32, 1)] * 4
    assert out["time_ms"] == pytest.approx(16.8) and out["workspace_bytes"] == 32768
    assert out["micro_batches"][0]["math_type"] == 1 and out["deterministic"] is False


def test_units_and_bytes_agree(table: str) -> None:
    a = ucudnn("plan", "--table", table, "--workspace", "64KiB", "--json")
    b = ucudnn("plan", "--table", table, "--workspace", "65536", "--json")
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout)["micro_batches"] == json.loads(b.stdout)["micro_batches"]
    assert json.loads(a.stdout)["workspace_bytes"] == 65536


def test_deterministic_restricts_to_the_slow_algorithm(table: str) -> None:
    r = ucudnn("plan", "--table", table, "--workspace", "1GiB", "--deterministic", "--json")
    assert r.returncode == 0, r.stderr
    assert [(m["batch"], m["algo"]) for m in json.loads(r.stdout)["micro_batches"]] == [(128, 0)]


def test_pareto_lists_plans_by_time(table: str) -> None:
    r = ucudnn("plan", "--table", table, "--workspace", "32KiB", "--pareto", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [p["workspace_bytes"] for p in out] == [32768, 16384, 8192, 4096, 2048, 16]
    times = [p["time_ms"] for p in out]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(p["name"] == "conv2.fwd" for p in out)


def test_text_output_is_readable(table: str) -> None:
    r = ucudnn("plan", "--table", table, "--workspace", "32KiB")
    assert r.returncode == 0 and "4 x 32 IMPLICIT_PRECOMP_GEMM (math 1)" in r.stdout  # conv2.fwd: a forward op


def test_kernel_selection_and_unknown_kernel(tmp_path: Path) -> None:
    path = write(tmp_path, {"kernels": [two_algo_kernel("a"), two_algo_kernel("b", batch=64)]})
    r = ucudnn("plan", "--table", path, "--kernel", "b", "--workspace", "1MiB", "--json")
    assert r.returncode == 0 and [m["batch"] for m in json.loads(r.stdout)["micro_batches"]] == [64]
    r = ucudnn("plan", "--table", path, "--workspace", "1MiB")
    assert r.returncode == 2 and "2 kernels" in r.stderr
    r = ucudnn("plan", "--table", path, "--kernel", "c", "--workspace", "1MiB")
    assert r.returncode == 2 and "unknown kernel 'c'" in r.stderr and "[1] b" in r.stderr


KEY = (
    "op={op};dtype=float;x=32,16,16/*,256,16,1;w=float,nchw,64,32,5,5;y=64,16,16/*,256,16,1;pad=2,2;"
    "stride=1,1;dilation=1,1;mode=cross_correlation;compute=float;groups=1;math=default"
)


@pytest.fixture
def keyed_table(tmp_path: Path) -> str:
    """Three kernels named by their ~190-character cache keys, as `ucudnn db export --perf-table` writes them."""
    return write(
        tmp_path, {"kernels": [two_algo_kernel(KEY.format(op=op), 32) for op in ("fwd", "bwd_data", "bwd_filter")]}
    )


def test_kernel_by_index_or_unique_part_of_its_name(keyed_table: str) -> None:
    listing = ucudnn("plan", "--table", keyed_table, "--list")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines()[1].startswith("[1] bwd_data x32x16x16 w64x32x5x5 pad2,2  (batch 32")
    assert max(len(line) for line in listing.stdout.splitlines()) <= 120
    by = {}
    for how in ("1", "op=bwd_data", "bwd_data x32x16x16", KEY.format(op="bwd_data")):
        r = ucudnn("plan", "--table", keyed_table, "--kernel", how, "--workspace", "8KiB", "--json")
        assert r.returncode == 0, (how, r.stderr)
        by[how] = json.loads(r.stdout)
    assert all(out["name"] == KEY.format(op="bwd_data") for out in by.values())
    text = ucudnn("plan", "--table", keyed_table, "--kernel", "bwd_data", "--workspace", "8KiB")
    assert text.returncode == 0 and text.stdout.startswith("bwd_data x32x16x16 w64x32x5x5 pad2,2: batch 32")
    assert "4 x 8 ALGO_1" in text.stdout and KEY[:40] not in text.stdout


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        ("op=bwd", "--kernel 'op=bwd' matches 2 kernels"),
        ("3", "--kernel 3: the table has kernels 0 to 2"),
        ("op=winograd", "unknown kernel 'op=winograd'"),
    ],
)
def test_ambiguous_or_unknown_kernel_lists_short_names(keyed_table: str, kernel: str, message: str) -> None:
    r = ucudnn("plan", "--table", keyed_table, "--kernel", kernel, "--workspace", "8KiB")
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1
    assert KEY[:60] not in r.stderr


def test_division_table_fits_in_120_columns(keyed_table: str) -> None:
    r = ucudnn("plan", "--table", keyed_table, "--total-workspace", "16KiB")
    assert r.returncode == 0, r.stderr
    assert "fwd x32x16x16 w64x32x5x5 pad2,2" in r.stdout and "x 8 IMPLICIT_PRECOMP_GEMM" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 120


def test_infeasible_reuse_exits_1(tmp_path: Path) -> None:
    kernel = two_algo_kernel()
    for m in kernel["measurements"]:
        m["workspace_bytes"] += 100
    path = write(tmp_path, {"kernels": [kernel]})
    for extra in ((), ("--pareto",)):
        r = ucudnn("plan", "--table", path, "--workspace", "50", "--json", *extra)
        assert r.returncode == 1
        out = json.loads(r.stdout)
        assert out["status"] == "infeasible" and "limit 50 bytes" in out["message"]


def test_division_ilp_and_greedy(tmp_path: Path) -> None:
    path = write(tmp_path, {"kernels": [two_algo_kernel("a"), two_algo_kernel("b", batch=64)]})
    outs = {}
    for method in ("ilp", "greedy"):
        r = ucudnn(
            "plan", "--table", path, "--total-workspace", "48KiB", "--policy", "pow2", "--method", method, "--json"
        )
        assert r.returncode == 0, r.stderr
        outs[method] = json.loads(r.stdout)
    ilp = outs["ilp"]
    assert ilp["status"] == "optimal" and ilp["total_workspace_bytes"] <= 48 * 1024
    assert [k["name"] for k in ilp["kernels"]] == ["a", "b"]
    assert ilp["total_time_ms"] == pytest.approx(sum(k["time_ms"] for k in ilp["kernels"]))
    assert ilp["total_workspace_bytes"] == sum(k["workspace_bytes"] for k in ilp["kernels"])
    assert {"message", "solve_time_s"} <= ilp.keys()
    assert outs["greedy"]["status"] == "feasible"
    assert outs["greedy"]["total_time_ms"] >= ilp["total_time_ms"] - 1e-9
    text = ucudnn("plan", "--table", path, "--total-workspace", "48KiB")
    assert text.returncode == 0 and "total" in text.stdout


def test_division_infeasible_exits_1(tmp_path: Path) -> None:
    kernel = two_algo_kernel()
    for m in kernel["measurements"]:
        m["workspace_bytes"] += 100
    path = write(tmp_path, {"kernels": [kernel, two_algo_kernel("b")]})
    r = ucudnn("plan", "--table", path, "--total-workspace", "100", "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["status"] == "infeasible" and "conv2.fwd" in out["message"] and out["kernels"] == []


def bad(mutate: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"kernels": [two_algo_kernel("a", batch=8), two_algo_kernel("b", batch=8)]}
    mutate(doc)
    return doc


BAD_FILES: list[tuple[str, object, str]] = [
    ("not json", "{kernels: [", "not valid JSON"),
    ("top level list", "[]", "top level: expected an object"),
    ("no kernels", {}, "kernels: missing"),
    ("empty kernels", {"kernels": []}, "kernels: empty"),
    (
        "missing time",
        bad(lambda d: d["kernels"][1]["measurements"][3].pop("time_ms")),
        "kernels[1].measurements[3].time_ms: missing",
    ),
    (
        "negative time",
        bad(lambda d: d["kernels"][1]["measurements"][3].update(time_ms=-2.0)),
        "kernels[1].measurements[3].time_ms: negative (-2.0)",
    ),
    (
        "string time",
        bad(lambda d: d["kernels"][0]["measurements"][0].update(time_ms="fast")),
        "kernels[0].measurements[0].time_ms: expected a number",
    ),
    (
        "float workspace",
        bad(lambda d: d["kernels"][0]["measurements"][1].update(workspace_bytes=1.5)),
        "kernels[0].measurements[1].workspace_bytes: expected an integer",
    ),
    (
        "negative workspace",
        bad(lambda d: d["kernels"][0]["measurements"][1].update(workspace_bytes=-1)),
        "kernels[0].measurements[1].workspace_bytes: negative (-1)",
    ),
    (
        "zero batch",
        bad(lambda d: d["kernels"][0]["measurements"][2].update(batch=0)),
        "kernels[0].measurements[2].batch: must be >= 1 (0)",
    ),
    (
        "bool algo",
        bad(lambda d: d["kernels"][0]["measurements"][2].update(algo=True)),
        "kernels[0].measurements[2].algo: expected an integer",
    ),
    (
        "bad determinism",
        bad(lambda d: d["kernels"][0]["measurements"][2].update(determinism="yes")),
        "kernels[0].measurements[2].determinism: expected true or false",
    ),
    ("missing name", bad(lambda d: d["kernels"][1].pop("name")), "kernels[1].name: missing"),
    ("duplicate name", bad(lambda d: d["kernels"][1].update(name="a")), "kernels[1].name: duplicate 'a'"),
    ("missing kernel batch", bad(lambda d: d["kernels"][0].pop("batch")), "kernels[0].batch: missing"),
    (
        "measurements not a list",
        bad(lambda d: d["kernels"][0].update(measurements={})),
        "kernels[0].measurements: expected a list",
    ),
    (
        "sizes cannot compose",
        bad(
            lambda d: d["kernels"][1].update(
                measurements=[m for m in d["kernels"][1]["measurements"] if m["batch"] in (2, 4)], batch=7
            )
        ),
        "cannot make up batch 7",
    ),
]


@pytest.mark.parametrize(("doc", "expected"), [(d, e) for _, d, e in BAD_FILES], ids=[i for i, _, _ in BAD_FILES])
def test_bad_files_exit_2_naming_the_problem(tmp_path: Path, doc: object, expected: str) -> None:
    path = write(tmp_path, doc)
    # Division reads every kernel, so every defect above is reached.
    r = ucudnn("plan", "--table", path, "--total-workspace", "1MiB")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert expected in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


def test_unreadable_file_and_bad_arguments_exit_2(tmp_path: Path, table: str) -> None:
    r = ucudnn("plan", "--table", str(tmp_path / "missing.json"), "--workspace", "1MiB")
    assert r.returncode == 2 and "missing.json: cannot read" in r.stderr
    r = ucudnn("plan", "--table", table, "--workspace", "lots")
    assert r.returncode == 2 and "--workspace" in r.stderr
    r = ucudnn("plan", "--table", table, "--workspace", "1MiB", "--policy", "half")
    assert r.returncode == 2 and "powerOfTwo" in r.stderr
    r = ucudnn("plan", "--table", table, "--workspace", "1MiB", "--batch", "0")
    assert r.returncode == 2 and "--batch must be positive" in r.stderr
    r = ucudnn("plan", "--table", table, "--total-workspace", "1MiB", "--pareto")
    assert r.returncode == 2 and "--pareto" in r.stderr


def test_native_prints_during_the_solve_do_not_reach_stdout() -> None:
    # HiGHS printf()s diagnostics during some solves; they must go to stderr, not into the JSON on stdout.
    code = (
        "import ctypes, sys\n"
        "from ucudnn.cli.plan import native_stdout_to_stderr\n"
        "print('before', flush=True)\n"
        "with native_stdout_to_stderr():\n"
        "    ctypes.CDLL(None).printf(b'native noise\\n')\n"
        "print('after')\n"
    )
    assert_native_output_diverted(code, "native noise")
