"""The checkout's root, for every test that needs it, the environment of a child Python that must import this
checkout, such a child run as a probe that prints JSON lines (or answers cases given as JSON), and what a test does
when a real client is absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]

# `.ci/run` sets UCUDNN_TEST_REAL_CLIENTS=required: there, a real client that is missing (NVIDIA's libcudnn.so.9 and
# headers, cudnn_frontend, PyTorch) is an installation that went wrong, not a reason to skip.
REAL_CLIENTS_VAR = "UCUDNN_TEST_REAL_CLIENTS"


def missing(reason: str, required_by: str) -> NoReturn:
    """Skip a test whose tools are not installed, saying what to install; fail instead where the variable
    ``required_by`` is ``required`` (CI sets it), so that CI never counts an absent tool as a skip."""
    if os.environ.get(required_by) == "required":
        pytest.fail(f"{reason} ({required_by}=required)", pytrace=False)
    pytest.skip(reason)


def real_client_missing(reason: str) -> NoReturn:
    """``missing`` for a real client (NVIDIA's libraries and headers, cudnn_frontend, a framework)."""
    missing(reason, REAL_CLIENTS_VAR)


def project_pythonpath(env: Mapping[str, str]) -> str:
    """PYTHONPATH for a child process: this checkout first, then the entries ``env`` already has. Replacing them
    would lose dependencies installed outside site-packages (``pip install --target DIR`` and PYTHONPATH=DIR, as on
    the GPU machines, where cffi lives only there)."""
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(ROOT), *kept])


def run_probe(module: str, *args: str, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` in a process of its own, from the checkout, with none of this process's UCUDNN_*
    variables but those in ``env``: it must exit 0; its output comes back."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
    child |= {"PYTHONPATH": project_pythonpath(os.environ), **env}
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=child, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def run_json_probe(module: str, *args: str, env: Mapping[str, str], timeout: float) -> list[dict[str, Any]]:
    """The same, its JSON lines."""
    proc = run_probe(module, *args, env=env, timeout=timeout)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def run_case_probe(module: str, lib: Path, cases: list[Any], *args: str, env: Mapping[str, str]) -> list[Any]:
    """``python -m module LIB ARGS`` from the checkout with exactly ``env``, ``cases`` as JSON on its stdin: it must
    exit 0 and print one JSON line per case, which come back parsed."""
    proc = subprocess.run([sys.executable, "-m", module, str(lib), *args], input=json.dumps(cases), cwd=ROOT,
                          env=dict(env), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(cases), proc.stderr[-4000:]
    return [json.loads(line) for line in lines]
