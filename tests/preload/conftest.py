"""Fixtures for the preload tests: the built artifacts, the C driver programs, running them with and without
LD_PRELOAD, and comparing their output files."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests._env import ROOT, project_pythonpath
from ucudnn import _paths

HERE = Path(__file__).resolve().parent
C_DIR = HERE / "c"
INCLUDE = ROOT / "shim" / "include"

# Tolerances of a micro-batched result against the undivided one: a different algorithm per micro-batch sums
# in another order (BackwardFilter also accumulates across micro-batches).
TOLERANCE = {"float": 2e-4, "double": 1e-10}


def preload_build() -> ModuleType:
    """shim/build/preload.py, the preload library's build script (its export list, its build function)."""
    sys.path.insert(0, str(ROOT / "shim" / "build"))
    try:
        return importlib.import_module("preload")
    finally:
        sys.path.pop(0)


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        pytest.fail(f"{what} not built at {path} (python shim/build/native.py host preload)")
    return path


@pytest.fixture(scope="session")
def preload_lib() -> Path:
    return _require(_paths.PRELOAD, "libucudnn.so")


@pytest.fixture(scope="session")
def host_lib() -> Path:
    return _require(_paths.HOST_CUDNN, "the host backend libcudnn.so.9")


def compile_c(
    *sources: Path, output: Path, link_cudnn: bool, extra: tuple[str, ...] = (), cc: str | None = None
) -> Path:
    """Compile and link ``sources`` into ``output`` with $CC (else cc), or ``cc`` (a cross compiler)."""
    cc = cc or os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) to build {sources[0].name}: install one (apt-get install gcc) or set CC")
    cmd = [cc, "-std=c11", "-D_GNU_SOURCE", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(INCLUDE)]
    cmd += [str(s) for s in sources] + ["-o", str(output)]
    if link_cudnn:
        cmd += [f"-L{_paths.LIB_DIR}", "-l:libcudnn.so.9", f"-Wl,-rpath,{_paths.LIB_DIR}"]
    cmd += ["-lpthread", "-ldl", *extra]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return output


def compile_driver(name: str, tmp_path_factory: pytest.TempPathFactory, extra: tuple[str, ...] = ()) -> Path:
    """c/<name>.c with the drivers' shared part (c/driver_common.c), linked against the host backend."""
    output = tmp_path_factory.mktemp("bin") / name
    return compile_c(C_DIR / f"{name}.c", C_DIR / "driver_common.c", output=output, link_cudnn=True, extra=extra)


@pytest.fixture(scope="session")
def conv_driver(host_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver("conv_driver", tmp_path_factory)


@pytest.fixture(scope="session")
def missing_real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c(C_DIR / "missing_real.c", output=tmp_path_factory.mktemp("bin") / "missing_real", link_cudnn=False)


@dataclass
class Run:
    """One run of a driver program: its JSON report, stderr, exit status and output files."""

    report: dict[str, Any]
    stderr: str
    returncode: int
    outputs: list[Path]

    def output(self, dtype: str, index: int = 0) -> np.ndarray:
        return np.fromfile(self.outputs[index], dtype=np.float64 if dtype == "double" else np.float32)


def base_env() -> dict[str, str]:
    """The test environment: no UCUDNN_* from outside, deterministic host timings, warnings only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "LD_PRELOAD"}
    env["UCUDNN_HOST_TIMING"] = "model"
    # The drivers' fixed planners answer any request with their one plan, so the check of new plans on real
    # executions (which also plans the undivided choice) is off unless a test turns it on (test_verify.py).
    env["UCUDNN_VERIFY_SAMPLES"] = "0"
    return env


def run_probe(script: str, *args: str, env: dict[str, str], timeout: float = 120) -> dict[str, Any]:
    """Run tests/preload/``script`` ARGS in a fresh interpreter with ``env``: the JSON of its last line of stdout."""
    proc = subprocess.run([sys.executable, str(HERE / script), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return report


def run_python_host(
    script: Path, args: list[str], tmp_path: Path, preload_lib: Path, env: dict[str, str] | None
) -> tuple[np.ndarray, dict[str, Any], str]:
    """Run a Python host ``script ARGS OUT_DIR`` in a fresh process (the repository importable, a cache in tmp_path)
    and read what it wrote: out.npy and report.json, and its stderr. env None: without the preload library; else
    with it and these UCUDNN_* settings."""
    out = tmp_path / f"{script.stem}{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    full = base_env()
    full["PYTHONPATH"] = project_pythonpath(full)
    full["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
    if env is not None:
        full["LD_PRELOAD"] = str(preload_lib)
        full.update(env)
    proc = subprocess.run([sys.executable, str(script), *args, str(out)], env=full, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return np.load(out / "out.npy"), report, proc.stderr


def messages(stderr: str) -> list[str]:
    """The shim's stderr lines other than its exit summary (which any process that planned prints)."""
    return [line for line in stderr.splitlines() if not line.endswith("(UCUDNN_LOG_LEVEL=error silences this line)")]


RunDriver = Callable[..., Run]


@pytest.fixture
def run_driver(conv_driver: Path, preload_lib: Path, tmp_path: Path) -> RunDriver:
    counter = iter(range(1000))

    def run(*args: str, preload: bool | Path = True, env: dict[str, str] | None = None, threads: int = 1) -> Run:
        out = tmp_path / f"out{next(counter)}"
        full_env = base_env()
        # Plans and benchmarks of a planner stay out of the user's cache: one scratch database per test.
        full_env["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
        if preload:
            full_env["LD_PRELOAD"] = str(preload if isinstance(preload, Path) else preload_lib)
        full_env.update(env or {})
        proc = subprocess.run(
            [str(conv_driver), *args, f"out={out}", f"threads={threads}"],
            env=full_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        assert lines, f"driver printed no report; rc={proc.returncode} stderr={proc.stderr}"
        report = json.loads(lines[-1])
        outputs = [Path(f"{out}.{t}") for t in range(threads)]
        return Run(report, proc.stderr, proc.returncode, outputs)

    return run


def last_json(stdout: str) -> dict[str, Any]:
    """The last line of a driver program's stdout that is a JSON object: its report."""
    report: dict[str, Any] = json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])
    return report


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    """|a - e| <= tol * max(1, |e|) elementwise, tol from TOLERANCE."""
    assert actual.shape == expected.shape
    assert np.all(np.isfinite(actual))
    tol = TOLERANCE[dtype]
    err = np.abs(actual.astype(np.float64) - expected.astype(np.float64)) / np.maximum(1.0, np.abs(expected))
    assert err.max() <= tol, f"max relative error {err.max():.3g} > {tol}"
