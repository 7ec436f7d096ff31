"""One rule for every UCUDNN_* setting, in the preload library (C) and in the planner (Python): blank (empty or
only blanks) means unset; any other invalid value is one message naming the variable and the accepted values,
the same words in C and Python, and then the documented behaviour (the preload library passes every call
through; the Python planner refuses to plan). Sizes follow one rule (every unit binary) at every entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ucudnn import config

from .conftest import C_DIR, base_env, compile_c

# Inputs for the size rule; C and Python must agree on each (value or rejection).
SIZES = [
    "64MB", "64M", "64mib", "64MiB", "64 MiB", " 2 TiB ", "64Kb", "64k", "1.5KiB", "0.5KiB", "1.3B", "0.5B", "7B",
    "", "   ", "\t", "64", "0064", "0", "1e6", "0x40", "-1", "+1", "64 apples", "MiB", "64Ki", "64iB", "64 i", "1.",
    ".5",
    "9007199254740992", "9007199254740993", "8192TiB", "8193TiB", "8191.5TiB", "18446744073709551615",
    "18446744073709551616", "99999999999999999999999", "1.500000000000000000T", "1.5000000000000000000T",
    "0.000000000000000001T", "\uff16\uff14", "64\u00a0MiB", "64MiB\u00a0",
]  # fmt: skip

# Per kind: values every variable of that kind must reject (garbage and huge values).
BAD = {
    config.Kind.SIZE: ["lots", "64XB", "18446744073709551615", "1e9", "-5"],
    config.Kind.LIMIT: ["automatic", "0.3B", "18446744073709551615"],
    config.Kind.BOOL: ["y", "maybe", "2", "yes!"],
    config.Kind.CHOICE: ["sometimes", "power of two"],
    config.Kind.COUNT: ["3.5", "-1", "9999999999", "1e3"],
    config.Kind.FRACTION: ["1e-2", "nan", "-0.1", "1234567890.5", ".5"],
}
PATTERN_BAD = ["0,,1", "gpu0", "0;1", "1 2"]


@pytest.fixture(scope="module")
def probe(preload_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c(C_DIR / "config_probe.c", output=tmp_path_factory.mktemp("bin") / "probe", link_cudnn=False)


def run_probe(probe: Path, preload_lib: Path, host_lib: Path, *args: str, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> tuple[list[dict[str, Any]], str]:  # fmt: skip
    full = base_env() | {"LD_PRELOAD": str(preload_lib), "UCUDNN_REAL_LIBCUDNN": str(host_lib)}
    full.pop("UCUDNN_VERIFY_SAMPLES")
    full.pop("UCUDNN_HOST_TIMING")
    full.update(env or {})
    proc = subprocess.run([str(probe), *args], env=full, capture_output=True, text=True, timeout=60, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def python_size(text: str) -> int | None:
    try:
        value = config.get("UCUDNN_TOTAL_WORKSPACE_SIZE", {"UCUDNN_TOTAL_WORKSPACE_SIZE": text})
    except config.ConfigError:
        return None
    assert isinstance(value, int)
    return value


def test_c_and_python_read_every_size_alike(probe: Path, preload_lib: Path, host_lib: Path) -> None:
    lines, _ = run_probe(probe, preload_lib, host_lib, *(f"UCUDNN_TOTAL_WORKSPACE_SIZE={s}" for s in SIZES))
    assert [line["value"] for line in lines] == SIZES
    for text, line in zip(SIZES, lines, strict=True):
        c_value = line["stats"]["total_workspace_size"] if line["rc"] == 0 else None
        assert c_value == python_size(text), f"C and Python disagree on {text!r}"
    # The documented rule: every unit is binary, however it is spelt; at most 2^53 bytes.
    assert python_size("64MB") == python_size("64M") == python_size("64mib") == 64 * 2**20
    assert python_size("9007199254740992") == 2**53 and python_size("9007199254740993") is None
    assert python_size("   ") == 0  # blank: unset, the default


def _bad_values(var: config.Var) -> list[str]:
    if var.kind is config.Kind.STRING:
        return PATTERN_BAD if var.pattern else []
    return BAD.get(var.kind, [])


SHIM_VARS = [v for v in config.VARIABLES if "shim" in v.readers]
CASES = [(v.name, bad) for v in SHIM_VARS for bad in _bad_values(v)]


def test_the_planners_settings_are_validated_by_the_shim_too() -> None:
    # UCUDNN_DETERMINISTIC and UCUDNN_TIME_SLACK were read only by the planner, half-validated.
    assert {"UCUDNN_DETERMINISTIC", "UCUDNN_TIME_SLACK"} <= {v.name for v in SHIM_VARS}
    assert config.BY_NAME["UCUDNN_TIME_SLACK"].kind is config.Kind.FRACTION
    assert all(_bad_values(v) for v in SHIM_VARS if v.kind is not config.Kind.PATH), "a kind without bad values"


@pytest.mark.parametrize(("name", "value"), CASES)
def test_a_bad_value_is_one_message_in_the_same_words_then_pass_through(
    probe: Path, preload_lib: Path, host_lib: Path, name: str, value: str
) -> None:
    with pytest.raises(config.ConfigError) as caught:
        config.get(name, {name: value})
    python_message = str(caught.value)
    assert python_message.startswith(f"{name}={value!r}: expected ")
    (line,), stderr = run_probe(probe, preload_lib, host_lib, env={name: value})
    said = [ln for ln in stderr.splitlines() if name in ln]
    assert len(said) == 1 and python_message in said[0], stderr
    assert "passes every call through" in said[0]
    assert line["stats"]["disabled"] is True


@pytest.mark.parametrize("value", ["", " ", "\t \t"])
@pytest.mark.parametrize("name", [v.name for v in config.VARIABLES])
def test_blank_means_unset_everywhere(
    probe: Path, preload_lib: Path, host_lib: Path, tmp_path: Path, name: str, value: str
) -> None:
    var = config.BY_NAME[name]
    assert config.get(name, {name: value}) == config.parse(var, var.default)
    if "shim" not in var.readers:
        return
    (line,), stderr = run_probe(probe, preload_lib, host_lib, env={name: value}, cwd=tmp_path)
    assert f"{name}='" not in stderr and line["stats"]["disabled"] is False
    assert list(tmp_path.iterdir()) == []  # e.g. no stats file or cache named by blanks


def test_set_option_follows_the_same_rule(probe: Path, preload_lib: Path, host_lib: Path) -> None:
    lines, stderr = run_probe(
        probe, preload_lib, host_lib, "UCUDNN_DETERMINISTIC=y", "UCUDNN_DETERMINISTIC= on ", "UCUDNN_TIME_SLACK=0.25",
        "UCUDNN_TIME_SLACK=1e-2", "UCUDNN_BENCHMARK_DEVICES=0, 1", "UCUDNN_TOTAL_WORKSPACE_SIZE=  ",
    )  # fmt: skip
    assert [line["rc"] for line in lines] == [-1, 0, 0, -1, 0, 0]
    assert "UCUDNN_DETERMINISTIC='y': expected 1 or 0" in stderr


def test_python_planner_refuses_a_bad_determinism_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from ucudnn.optimizer import AlgoPerf
    from ucudnn.planner import Planner

    monkeypatch.setenv("UCUDNN_DETERMINISTIC", "y")  # a typo: must not silently mean "not deterministic"

    def bench(b: int) -> list[AlgoPerf]:
        return [AlgoPerf(b, 0, 1.0 * b, 0, False, 0), AlgoPerf(b, 1, 2.0 * b, 0, True, 0)]

    with pytest.raises(config.ConfigError, match="UCUDNN_DETERMINISTIC='y': expected 1 or 0"):
        Planner().plan(
            key="k", backend_id="b", batch=4, workspace_limit_bytes=0, policy="powerOfTwo", deterministic_only=False,
            algo_count=2, benchmark=bench,
        )  # fmt: skip


def test_blank_database_path_is_the_default() -> None:
    default = config.database_path({"HOME": "/nonexistent"})
    assert config.database_path({"HOME": "/nonexistent", "UCUDNN_DATABASE": "   "}) == default


def _ucudnn_run(env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")} | env
    cmd = [sys.executable, "-m", "ucudnn.cli", "run", *options, "--", sys.executable, "-c", "print('ran')"]
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("name", "value"),
    [("UCUDNN_DETERMINISTIC", "y"), ("UCUDNN_TIME_SLACK", "lots"), ("UCUDNN_TOTAL_WORKSPACE_SIZE", "2^64"),
     ("UCUDNN_HOST_TIMING", "fast"), ("UCUDNN_BENCHMARK_DEVICES", "gpu0")],
)  # fmt: skip
def test_ucudnn_run_checks_the_environment_it_hands_on(name: str, value: str) -> None:
    proc = _ucudnn_run({name: value})
    assert proc.returncode == 2 and "ran" not in proc.stdout
    assert proc.stderr.count("\n") == 1 and f"{name}={value!r}: expected" in proc.stderr


def test_ucudnn_run_accepts_good_and_blank_values() -> None:
    proc = _ucudnn_run({"UCUDNN_DETERMINISTIC": "1", "UCUDNN_DATABASE": " ", "UCUDNN_TIME_SLACK": "0.5"})
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stderr
    # Nothing about the values; and nothing about the program, which never loads cuDNN.
    assert proc.stderr == "", proc.stderr


def test_ucudnn_run_warns_about_a_name_that_is_no_variable() -> None:
    proc = _ucudnn_run({"UCUDNN_DETERMINSTIC": "1"})  # misspelt: it would be ignored
    assert proc.returncode == 0 and "ran" in proc.stdout
    assert "UCUDNN_DETERMINSTIC is not a ucudnn variable" in proc.stderr


@pytest.mark.parametrize(
    ("value", "model", "bad"),
    [(" model ", 1, False), ("MODEL", 1, False), ("  ", 0, False), ("", 0, False), ("measure", 0, False),
     ("fast", 0, True), ("mod el", 0, True)],
)  # fmt: skip
def test_the_host_backend_reads_its_timing_by_the_same_rule(
    probe: Path, preload_lib: Path, host_lib: Path, value: str, model: int, bad: bool
) -> None:
    name = "UCUDNN_HOST_TIMING"
    try:
        python = config.get(name, {name: value})
        python_message = None
    except config.ConfigError as exc:
        python, python_message = None, str(exc)
    assert (python_message is not None) is bad
    assert bad or (python == "model") is bool(model)
    (line,), stderr = run_probe(probe, preload_lib, host_lib, "--host", str(host_lib), env={name: value})
    assert line["host_timing_model"] == model
    if bad:
        assert python_message is not None and python_message in stderr and stderr.count("\n") == 1
    else:
        assert name not in stderr


def test_every_size_entry_point_follows_the_rule(tmp_path: Path) -> None:
    from ucudnn.bench.cli import parse_limits
    from ucudnn.policy import KernelOverride, WorkspacePolicy

    mib64 = 64 * 2**20
    assert parse_limits("64MB,64M,64mib") == [mib64]  # one limit, however it is spelt
    assert WorkspacePolicy(workspace_limit_bytes="64MB").workspace_limit_bytes == mib64  # type: ignore[arg-type]
    assert KernelOverride("64M", op="fwd").workspace_limit_bytes == mib64  # type: ignore[arg-type]
    table = tmp_path / "table.json"
    measurements = [{"batch": b, "algo": 0, "time_ms": 1.0 * b, "workspace_bytes": 0} for b in (1, 2, 4)]
    table.write_text(json.dumps({"kernels": [{"name": "k", "batch": 4, "measurements": measurements}]}))
    for spelling in ("64MB", "64M", "64mib"):
        proc = subprocess.run(
            [sys.executable, "-m", "ucudnn.cli", "plan", "--table", str(table), "--batch", "4", "--workspace",
             spelling, "--json"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert f'"workspace_limit_bytes": {mib64}' in proc.stdout
