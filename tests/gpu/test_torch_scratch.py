"""Benchmark scratch borrowed from PyTorch's caching allocator (UCUDNN_SCRATCH_FROM_FRAMEWORK) on a real GPU
(marker ``gpu``), on PyTorch's legacy path, from inside PyTorch's own cuDNN calls.

One process under ``ucudnn run --workspace 64MiB``: two convolutions (N = 32, 64 channels, 56 x 56; the second
dilated, so that the two are planned apart) are computed first without cuDNN, as the reference. Then ballast
tensors take all but 40-48 MiB of the device and are freed: PyTorch's cache holds them, the driver shows them used.
Each convolution's forward and backward then run through cuDNN under ucudnn, the first with the setting off, the
second with it on. ``Get*_v7`` plans them, and the tensors of cudnnFind's own search at N = 32 (x and y, 24.5 MiB
each) cannot both be had in less than 48 MiB: without the setting that search is short of memory; with it the
searches are made again on buffers borrowed from PyTorch's cache, fewer are left short (none, by design), and the
results still equal the reference. The 40 MiB left are for what cuDNN and the driver allocate beside the searches
(kernels loaded on first use among them).

Asserted only what holds on any GPU: not which algorithms or plans it chooses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_torch_legacy_path import _torch_cuda_reason

pytestmark = pytest.mark.gpu

SCRIPT = r"""
import json, sys
import torch
from ucudnn import bridge

KEYS = ("legacy_benchmarks", "benchmarks_short_of_memory", "scratch_searches", "framework_scratch_allocs")
torch.manual_seed(0)
convs = {"off": torch.nn.Conv2d(64, 64, 3, padding=1).cuda(),
         "on": torch.nn.Conv2d(64, 64, 3, padding=2, dilation=2).cuda()}
x = torch.randn(32, 64, 56, 56, device="cuda")


def step(conv, inp=x):
    xx = inp.clone().requires_grad_()
    y = conv(xx)
    y.square().sum().backward()
    torch.cuda.synchronize()
    out = [y.double().square().sum().item(), xx.grad.double().abs().sum().item(),
           conv.weight.grad.double().abs().sum().item()]
    conv.zero_grad(set_to_none=True)
    return out


with torch.backends.cudnn.flags(enabled=False):
    ref = {mode: step(conv) for mode, conv in convs.items()}
step(torch.nn.Conv2d(64, 8, 3).cuda(), x[:2])  # cuDNN's handle and first kernels, before the device is full
ballast = []  # in chunks of at most 1 GiB, until 40-48 MiB are left
while (size := min(1 << 30, torch.cuda.mem_get_info()[0] - (40 << 20))) >= 8 << 20:
    ballast.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
del ballast
out = {"free_mib": torch.cuda.mem_get_info()[0] >> 20, "reserved_mib": torch.cuda.memory_reserved() >> 20}
for mode, conv in convs.items():
    bridge.set_option("UCUDNN_SCRATCH_FROM_FRAMEWORK", "1" if mode == "on" else "0")
    before = bridge.stats()
    got = step(conv)
    after = bridge.stats()
    out[mode] = {"got": got, "ref": ref[mode], **{k: after[k] - before[k] for k in KEYS}}
json.dump(out, open(sys.argv[1], "w"))
"""


def test_legacy_searches_borrow_scratch_from_pytorch_inside_its_calls(tmp_path: Path) -> None:
    reason = _torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    script = tmp_path / "scratch.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
    ucudnn = [sys.executable, "-c", "import sys; from ucudnn.cli import main; sys.exit(main())"]
    run = subprocess.run(
        [*ucudnn, "run", "--torch-api", "legacy", "--workspace", "64MiB", "--database", str(tmp_path / "c.sqlite"),
         "--", sys.executable, str(script), str(tmp_path / "out.json")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    out: dict[str, Any] = json.loads((tmp_path / "out.json").read_text())
    assert out["free_mib"] <= 256, out  # the ballast filled the device
    for mode in ("off", "on"):
        # Other algorithms (TF32 included) change rounding, not results.
        assert out[mode]["got"] == pytest.approx(out[mode]["ref"], rel=1e-2), (mode, out)
        assert out[mode]["legacy_benchmarks"] > 0, (mode, out)
    off, on = out["off"], out["on"]
    assert off["benchmarks_short_of_memory"] > 0 and off["framework_scratch_allocs"] == 0, out
    assert off["scratch_searches"] == 0, out
    assert on["scratch_searches"] > 0 and on["framework_scratch_allocs"] > 0, out
    # None short, by design; fewer is what holds whatever cuDNN's own allocations need beside the searches.
    assert on["benchmarks_short_of_memory"] < off["benchmarks_short_of_memory"], out
