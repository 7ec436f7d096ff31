"""Builds the C helpers of the bridge tests (once per session) and runs Python/C hosts in subprocesses.

Everything that loads a shim or registers a planner runs in a child process, so the pytest process never has
a planner registered or a preload library in it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._env import ROOT
from ucudnn import _paths

HERE = Path(__file__).resolve().parent
C_DIR = HERE / "c"
INCLUDE = ROOT / "shim" / "include"
CFLAGS = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-I", str(INCLUDE)]


def cc() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def compile_c(args: list[str]) -> None:
    proc = subprocess.run([*cc(), *CFLAGS, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling {args} failed:\n{proc.stderr}")


@dataclass(frozen=True)
class FakeBuild:
    shim: Path  # libfake_shim.so: the control API with a synthetic benchmark
    c_host: Path  # a C program (no Python) linked to the fake shim


@pytest.fixture(scope="session")
def fake_build(tmp_path_factory: pytest.TempPathFactory) -> FakeBuild:
    out = tmp_path_factory.mktemp("bridge-c")
    shim = out / "libfake_shim.so"
    compile_c(["-fPIC", "-shared", "-o", str(shim), str(C_DIR / "fake_shim.c"), "-ldl"])
    host = out / "c_host"
    compile_c(["-o", str(host), str(C_DIR / "c_host.c"), f"-L{out}", "-lfake_shim", f"-Wl,-rpath,{out}", "-pthread"])
    return FakeBuild(shim, host)


@pytest.fixture(scope="session")
def embedded_planner() -> Path:
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail(f"{_paths.EMBEDDED_PLANNER} is not built (python shim/build/native.py planner_embed)")
    return _paths.EMBEDDED_PLANNER


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: no inherited UCUDNN_* / LD_PRELOAD, quiet logging unless asked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "LD_PRELOAD"}
    env.update(extra or {})
    return env


def run_python(code: str, env: Mapping[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cmd([sys.executable, "-c", code], env, timeout)


def run_cmd(cmd: list[str], env: Mapping[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=dict(env), capture_output=True, text=True, timeout=timeout)
