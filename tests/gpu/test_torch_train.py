"""``python -m ucudnn.bench.torch_train`` on a real GPU (marker ``gpu``): a small torchvision network trained by
PyTorch alone, under ``ucudnn run`` and under memory pressure, every configuration in a process of its own.

No assertion on time (the script prints the figures) nor on which plans a particular GPU prefers: every run
finishes, trains from the same state to the same losses, and the ucudnn runs were planned by the shim.
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
    """``torch_train`` with these options (skipped without CUDA torch and torchvision): its output and results."""
    reason = _torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    try:
        import torchvision  # noqa: F401
    except ImportError:
        pytest.skip("torchvision is not installed (pip install torchvision)")
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


def test_small_network_trains_alike_with_and_without_ucudnn(tmp_path: Path) -> None:
    _, rows = _train(tmp_path, "--models", "resnet18:32", "--workspace", "8MiB", "--headroom", "256MiB")
    results = {r["config"]: r for r in rows}
    expected = {"torch", "ucudnn", "torch+pressure", "ucudnn+pressure", "cudnn@8MiB", "ucudnn@8MiB"}
    assert set(results) == expected
    ref = results["torch"]["losses"]
    assert len(ref) == 12
    for name, r in results.items():
        assert r["error"] is None, r
        assert r["ms_per_iter"] > 0
        # Different algorithms round differently (TF32 included); training diverges only by rounding.
        assert r["losses"] == pytest.approx(ref, rel=2e-2, abs=2e-2), name
        if name.startswith(("ucudnn", "cudnn@")):
            assert r["stats"]["planned"] > 0, (name, r["stats"])
    assert results["torch+pressure"]["ballast_mib"] > 0


def test_graph_path_resnet_and_conv3d_train_alike_under_pressure(tmp_path: Path) -> None:
    """PyTorch's default graph path, with and without memory pressure: every run finishes with PyTorch alone's
    losses, and ucudnn saw PyTorch's convolution graphs (whether it offers variants is the GPU's trade-off)."""
    stdout, results = _train(
        tmp_path, "--api", "graph", "--models", "resnet18:32,conv3d:4", "--frames", "8", "--headroom", "64MiB"
    )
    assert "offers" in stdout
    assert {(r["model"], r["config"]) for r in results} == {
        (m, c) for m in ("resnet18", "conv3d") for c in ("torch", "ucudnn", "torch+pressure", "ucudnn+pressure")
    }
    for r in results:
        assert r["error"] is None, r
        ref = next(q for q in results if q["model"] == r["model"] and q["config"] == "torch")["losses"]
        assert r["losses"] == pytest.approx(ref, rel=2e-2, abs=2e-2), (r["model"], r["config"])
        if r["config"].startswith("ucudnn"):
            assert r["stats"]["graph_conv_plans"] > 0, r["stats"]
