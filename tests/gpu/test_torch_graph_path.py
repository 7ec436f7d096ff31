"""PyTorch's default cuDNN path (the graph API) under ``ucudnn run`` on a real GPU (marker ``gpu``).

``ucudnn run`` leaves PyTorch on its default path: cudnn_frontend builds graphs and calls cudnnBackend*, which the
shim records and, under an explicit limit, plans. Results must match the run without ucudnn and the counters must
show that the shim saw PyTorch's convolution graphs. Whether a plan divides the batch is the GPU's trade-off, so
it is not asserted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .test_torch_legacy_path import _torch_cuda_reason, run_net_alone_and_under_ucudnn

pytestmark = pytest.mark.gpu
UCUDNN = [sys.executable, "-c", "import sys; from ucudnn.cli import main; sys.exit(main())"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "TORCH_CUDNN_V8_API_DISABLED"}


def test_torch_graph_api_convolutions_through_ucudnn_match(tmp_path: Path) -> None:
    stats = run_net_alone_and_under_ucudnn(tmp_path, _env(), 0)
    assert stats["graph_calls"] > 0 and stats["graph_conv_plans"] > 0 and stats["graph_executes"] > 0, stats
    assert stats["calls"] == 0, stats  # nothing on the legacy path: PyTorch stayed on its default one


def test_the_example_on_pytorch_under_ucudnn_run(tmp_path: Path) -> None:
    reason = _torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    example = [sys.executable, "-m", "ucudnn.examples.train", "--backend", "torch", "--steps", "3"]
    alone = subprocess.run(example, env=_env(), capture_output=True, text=True, timeout=600)
    under = subprocess.run(
        [*UCUDNN, "run", "--workspace", "1MiB", "--database", str(tmp_path / "cache.sqlite"), "--", *example],
        env=_env(), capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert alone.returncode == 0 and under.returncode == 0, alone.stderr + under.stderr
    losses = [[float(v) for v in re.findall(r"loss (\S+)", p.stdout)] for p in (alone, under)]
    assert len(losses[0]) == 3 and losses[1] == pytest.approx(losses[0], rel=2e-2, abs=2e-2)
    assert re.search(r"^ucudnn: .*graph API: [1-9]\d* convolution plan", under.stderr, re.M), under.stderr
