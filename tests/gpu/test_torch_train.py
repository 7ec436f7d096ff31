"""``python -m ucudnn.bench.torch_train`` on a real GPU (marker ``gpu``): the conv3d network trained by PyTorch
alone, under ``ucudnn run`` with memory pressure and under an explicit limit, each in a process of its own.

No assertion on time (the script prints the figures) nor on which plans a particular GPU prefers: every run
finishes, and the script's own check passes (the ucudnn runs saw PyTorch's convolutions and trained to PyTorch
alone's losses). Three runs of a small network keep the GPU tier inside the acceptance's time box; the acceptance
runs the script itself on ResNet-18 on both of PyTorch's paths, where the same check sets its exit status.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_torch_legacy_path import _torch_cuda_reason

pytestmark = pytest.mark.gpu


def _train(tmp_path: Path, *options: str) -> tuple[str, list[dict[str, Any]]]:
    """``torch_train`` with these options (skipped without CUDA torch; the conv3d network needs no torchvision): its
    output and results."""
    reason = _torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "train.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.bench.torch_train", *options, "--image", "64", "--warmup", "9", "--iters", "3",
         "--json", str(out)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ms/iter" in proc.stdout
    results: list[dict[str, Any]] = json.loads(out.read_text())
    return proc.stdout, results


def test_graph_path_trains_alike_under_pressure_and_a_limit(tmp_path: Path) -> None:
    stdout, results = _train(
        tmp_path, "--api", "graph", "--models", "conv3d:4", "--frames", "8", "--headroom", "128MiB", "--workspace",
        "8MiB", "--configs", "torch,ucudnn+pressure,ucudnn@8MiB",
    )  # fmt: skip
    assert "offers" in stdout and "FAILED" not in stdout
    by = {r["config"]: r for r in results}
    assert set(by) == {"torch", "ucudnn+pressure", "ucudnn@8MiB"}
    assert len(by["torch"]["losses"]) == 12 and by["ucudnn+pressure"]["ballast_mib"] > 0
    for name in ("ucudnn+pressure", "ucudnn@8MiB"):
        assert by[name]["error"] is None and by[name]["stats"]["graph_conv_plans"] > 0, by[name]
        assert by[name]["losses"] == pytest.approx(by["torch"]["losses"], rel=2e-2, abs=2e-2), name
