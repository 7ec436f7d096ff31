"""PyTorch's default cuDNN path (the graph API) under ``ucudnn run`` on a real GPU (marker ``gpu``).

``ucudnn run`` leaves PyTorch on its default path: cudnn_frontend builds graphs and calls cudnnBackend*, which the
shim records and, under an explicit limit, plans. Results must match the run without ucudnn and the counters must
show that the shim saw PyTorch's convolution graphs. Whether a plan divides the batch is the GPU's trade-off, so
it is not asserted.
"""

from __future__ import annotations

import json
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


FRAMEWORK_MEMORY = """
import ctypes, json, torch
x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
del x  # freed to PyTorch's cache: reserved, not allocated, not free for the driver
free, _ = torch.cuda.mem_get_info()
held = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
lib = ctypes.CDLL(None)
lib.ucudnn_debug_framework_memory.restype = ctypes.c_size_t
print(json.dumps({"free": free, "held": held, "figure": lib.ucudnn_debug_framework_memory()}))
"""


def test_framework_memory_counts_what_torch_caches(tmp_path: Path) -> None:
    """In a PyTorch process the shim's figure of what the framework can allocate is the driver's free memory plus
    PyTorch's reserved-but-unused bytes (rounded down to 64 MiB), not the driver's free memory alone."""
    reason = _torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    from ucudnn import _paths

    env = _env() | {"LD_PRELOAD": str(_paths.PRELOAD), "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite")}
    proc = subprocess.run([sys.executable, "-c", FRAMEWORK_MEMORY], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["held"] >= 256 << 20, got
    # Free memory moves a little between the two reads; the figure is rounded down to 64 MiB.
    assert got["free"] + got["held"] - (128 << 20) <= got["figure"] <= got["free"] + got["held"] + (64 << 20), got
    assert got["figure"] > got["free"], got
