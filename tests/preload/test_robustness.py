"""Pass-through, bad input and failure paths: the shim never crashes its host and never changes a result."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import RunDriver, base_env, messages


def _bitwise_equal(a: object, b: object) -> bool:
    return bool(Path(str(a)).read_bytes() == Path(str(b)).read_bytes())


def test_disable_is_exact_pass_through(run_driver: RunDriver) -> None:
    args = ["op=bwd_filter", "n=8", "beta=0.5", "query=find", "repeat=2"]
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, "planner=fixed", "plan=3:0,5:1", env={"UCUDNN_DISABLE": "1"})
    assert got.report["perf"] == ref.report["perf"]
    assert _bitwise_equal(got.outputs[0], ref.outputs[0])
    stats = got.report["stats"]
    assert stats["disabled"] is True
    assert stats["calls"] == 2 and stats["passthrough"] == 2 and stats["planned"] == 0


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("UCUDNN_BATCH_SIZE_POLICY", "fastest", "undivided, powerOfTwo, all"),
        ("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "64XB", "64MiB"),
        ("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "0.3B", "64MiB"),
        ("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "automatic", "expected auto, bytes"),
        ("UCUDNN_DISABLE", "maybe", "1 or 0"),
        ("UCUDNN_LOG_LEVEL", "loud", "error, warning, info, debug"),
        ("UCUDNN_VERIFY_SAMPLES", "3.5", "a non-negative integer"),
        ("UCUDNN_VERIFY_SAMPLES", "-1", "a non-negative integer"),
        ("UCUDNN_VERIFY_MARGIN", "1e-2", "a non-negative number"),
        ("UCUDNN_VERIFY_MARGIN", "nan", "a non-negative number"),
        ("UCUDNN_HOST_DEVICE_MEMORY", "lots", "64MiB"),
    ],
)
def test_bad_value_is_named_and_passes_through(run_driver: RunDriver, name: str, value: str, accepted: str) -> None:
    args = ["op=fwd", "n=8", "query=get"]
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, "planner=fixed", "plan=4:1,4:0", env={name: value})
    assert got.returncode == 0
    assert f"{name}='{value}'" in got.stderr and accepted in got.stderr
    assert got.report["stats"]["disabled"] is True and got.report["stats"]["planned"] == 0
    assert _bitwise_equal(got.outputs[0], ref.outputs[0])


def test_good_values_in_any_spelling(run_driver: RunDriver) -> None:
    env = {
        "UCUDNN_BATCH_SIZE_POLICY": " ALL ",
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT": "1.5KiB",
        "UCUDNN_DISABLE": "off",
        "UCUDNN_VERIFY_SAMPLES": " 0 ",
        "UCUDNN_VERIFY_MARGIN": "0.05",
    }
    got = run_driver("op=fwd", "n=8", "planner=fixed", "plan=4:0,4:0", "ws=4096", env=env)
    assert messages(got.stderr) == [] and got.report["stats"]["planned"] == 1
    plan = got.report["last_plan"]
    assert plan["policy"] == "all" and plan["limit"] == 1536


def test_set_option(run_driver: RunDriver) -> None:
    bad = run_driver("op=fwd", "n=8", "setopt=UCUDNN_BATCH_SIZE_POLICY:sometimes")
    assert bad.report["setopt_rc"] == -1 and "UCUDNN_BATCH_SIZE_POLICY='sometimes'" in bad.stderr
    assert bad.report["stats"]["disabled"] is False
    assert run_driver("op=fwd", "n=8", "setopt=UCUDNN_NO_SUCH:1").report["setopt_rc"] == -1
    good = run_driver(
        "op=fwd", "n=8", "setopt=UCUDNN_DEFAULT_WORKSPACE_LIMIT:2KiB", "planner=fixed", "plan=4:0,4:0", "ws=1000000"
    )
    assert good.report["setopt_rc"] == 0 and good.report["last_plan"]["limit"] == 2048


@pytest.mark.parametrize(
    ("planner", "plan", "counter"),
    [
        ("fixed", "3:0,2:0", "rejected_plans"),  # sums to 5, not 8
        ("fixed", "8:9", "rejected_plans"),  # no forward algorithm 9
        ("fixed", "4:0,0:0,4:0", "rejected_plans"),  # empty micro-batch
        ("fixed", "8:6", "rejected_plans"),  # WINOGRAD (fused) is refused by the host backend's workspace query
        ("huge_ws", "8:0", "rejected_plans"),  # claims more workspace than the limit
        ("fail", "", "planner_errors"),
        ("nofit", "", "no_plan"),
    ],
)
def test_bad_or_no_plan_passes_through(run_driver: RunDriver, planner: str, plan: str, counter: str) -> None:
    args = ["op=fwd", "n=8", "beta=0.5", "ws=1000000", "repeat=2"]
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, f"planner={planner}", f"plan={plan}")
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats[counter] == 1  # asked once, remembered
    assert stats["planned"] == 0 and stats["passthrough"] == 2
    assert _bitwise_equal(got.outputs[0], ref.outputs[0])


# HALF and BFLOAT16 are planned now (test_exec_16bit.py); INT8 still passes through, tested there.


def test_stats_file(run_driver: RunDriver, tmp_path: Path) -> None:
    path = tmp_path / "stats-%p.json"
    run_driver(
        "op=fwd", "n=8", "planner=fixed", "plan=2:0,6:1", "ws=1000000", "repeat=3", env={"UCUDNN_STATS_FILE": str(path)}
    )
    files = list(tmp_path.glob("stats-*.json"))
    assert len(files) == 1
    stats = json.loads(files[0].read_text())
    for key in ("calls", "planned", "micro_batches", "passthrough", "kernels"):
        assert isinstance(stats[key], int)
    assert stats["calls"] == 3 and stats["planned"] == 3 and stats["micro_batches"] == 6 > stats["planned"]
    assert stats["kernels"] == 1


def test_missing_real_library(missing_real: Path, preload_lib: Path, host_lib: Path) -> None:
    env = base_env() | {"LD_PRELOAD": str(preload_lib)}
    proc = subprocess.run([str(missing_real)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["forward"] == report["workspace"] == report["get_v7"] == 1001  # NOT_INITIALIZED
    assert report["stats"]["missing_real"] == 3
    assert "no real cuDNN found" in proc.stderr and "UCUDNN_REAL_LIBCUDNN" in proc.stderr

    # The explicit path is the last resort; pointing it at the shim itself must not recurse.
    proc = subprocess.run(
        [str(missing_real)],
        env=env | {"UCUDNN_REAL_LIBCUDNN": str(preload_lib)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(proc.stdout)["forward"] == 1001
    proc = subprocess.run(
        [str(missing_real)],
        env=env | {"UCUDNN_REAL_LIBCUDNN": str(host_lib)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(proc.stdout)
    assert report["forward"] == 2000  # the host backend's BAD_PARAM for a NULL handle: it was forwarded
    assert report["stats"]["real_library"] == str(host_lib)


def test_invalid_caller_algorithm_keeps_cudnns_answer(run_driver: RunDriver) -> None:
    ref = run_driver("op=fwd", "n=8", "algo=42", "ws=0", preload=False)
    got = run_driver("op=fwd", "n=8", "algo=42", "ws=0", "planner=fixed", "plan=4:0,4:0")
    assert ref.returncode == got.returncode == 1 and got.report["stats"]["passthrough"] == 1
    assert got.stderr.replace("\n", "") == ref.stderr.replace("\n", "")


@pytest.mark.parametrize(
    ("version", "soname", "not_supported"), [(8907, "libcudnn.so.8", 9), (92400, "libcudnn.so.9", 3000)]
)
def test_own_statuses_follow_the_real_librarys_numbering(
    missing_real: Path, preload_lib: Path, tmp_path: Path, version: int, soname: str, not_supported: int
) -> None:
    """A status the shim makes itself is numbered as the library it forwards to numbers them: cuDNN 8 said 9
    for NOT_SUPPORTED, cuDNN 9 says 3000. A fake front library that has only cudnnGetVersion and
    cudnnConvolutionForward: the workspace query it lacks is the shim's own NOT_SUPPORTED."""
    source = tmp_path / "fake.c"
    source.write_text(
        "#include <stddef.h>\n"
        f"size_t cudnnGetVersion(void) {{ return {version}; }}\n"
        "int cudnnConvolutionForward(void) { return 0; }\n"
    )
    fake = tmp_path / soname
    subprocess.run(
        [os.environ.get("CC", "cc"), "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(fake), str(source)],
        check=True,
        capture_output=True,
    )
    env = base_env() | {"LD_PRELOAD": str(preload_lib), "UCUDNN_REAL_LIBCUDNN": str(fake)}
    proc = subprocess.run([str(missing_real)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["forward"] == 0  # forwarded to the fake's cudnnConvolutionForward unchanged
    assert report["workspace"] == not_supported
    assert report["stats"]["real_version"] == version
