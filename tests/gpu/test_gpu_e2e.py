"""End to end on a real GPU: the preload library in front of the real cuDNN (marker ``gpu``).

Skipped with the reason where no NVIDIA GPU (tests/conftest.py) or no CuPy is usable. They drive
``ucudnn-bench --backend cuda``, which allocates with CuPy, times with CUDA events and runs ucudnn's plans
through the same preload library users run, checking every output against the undivided call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CUPY_INSTALL, cupy_unavailable_reason

pytestmark = pytest.mark.gpu


def _bench(tmp_path: Path, *args: str, env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    reason = cupy_unavailable_reason()
    if reason:
        pytest.skip(f"{reason}; needs {CUPY_INSTALL}")
    out = tmp_path / "bench.json"
    env = {**os.environ, "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite"), **(env_extra or {})}
    cmd = [sys.executable, "-c", "import sys; from ucudnn.bench.cli import main; sys.exit(main())"]
    proc = subprocess.run(
        [*cmd, "--backend", "cuda", "--json", str(out), "--progress", "none", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_quick_suite_on_real_cudnn_matches_undivided(tmp_path: Path) -> None:
    data = _bench(tmp_path, "--suite", "quick", "--workspace", "1MiB,16MiB", "--policy", "undivided,powerOfTwo")
    rows = [r for r in data["rows"] if r["status"] == "ok"]
    assert rows, data
    for row in rows:
        assert row["output_match"], row
        assert row["plan_workspace_bytes"] <= row["limit_bytes"], row
        assert sum(mb["batch"] * mb["count"] for mb in row["micro_batches"]) == row["n"], row
    undivided = [r for r in rows if r["policy"] == "undivided"]
    assert all(len(r["micro_batches"]) == 1 and r["micro_batches"][0]["count"] == 1 for r in undivided)


def test_disabled_shim_is_pure_passthrough_on_gpu(tmp_path: Path) -> None:
    data = _bench(
        tmp_path, "--suite", "quick", "--ops", "fwd", "--workspace", "1MiB", env_extra={"UCUDNN_DISABLE": "1"}
    )
    rows = [r for r in data["rows"] if r["status"] == "ok"]
    assert rows, data
    for row in rows:
        assert row["output_match"], row
        assert row["passthrough_calls"] > 0, row
