"""The preload library's calls of the real CUDA driver, audited on a GPU (marker ``gpu``).

On the host the stand-in driver (tests/preload/c/standin_driver.c) checks how the preload library uses the driver
API: every call succeeds, every event and allocation is given back, no event is read before it is known complete,
none is recorded on a stream being captured, and the calls after planning neither allocate nor synchronise. The
stand-in is our reading of the driver; here tests/preload/c/driver_audit.c stands in front of the real
libcuda.so.1 (the framework and the CUDA runtime reach the driver through it, unobserved) and records the preload
library's own calls while PyTorch trains a small network on either of its paths under ``ucudnn run --workspace
1MiB`` with a fresh cache, so that its convolutions are planned, benchmarked and checked. A call the real driver
refuses would not fail a convolution (the shim goes without the check or the scratch) but would leave ucudnn
silently slower: the audit names it. tests/preload/test_driver_paths.py runs the same audit over the stand-in.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._driver import audited, build_audit

from .test_torch_legacy_path import _torch_cuda_reason

pytestmark = pytest.mark.gpu
RUN_LAST = True  # after the GPU tests the acceptance's time box is for (tests/conftest.py)

SCRIPT = r"""
import ctypes, json, sys
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 64, 5, padding=2), torch.nn.ReLU(),
    torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(64, 32, 3, padding=1),
).cuda()
x = torch.randn(64, 3, 32, 32, device="cuda")
opt = torch.optim.SGD(net.parameters(), lr=0.01)
def step():
    opt.zero_grad()
    loss = net(x).square().mean()
    loss.backward()
    opt.step()
    return loss
for _ in range(2):  # every convolution planned, the first executions checked
    step()
torch.cuda.synchronize()
ctypes.CDLL("libcuda.so.1").ucudnn_audit_mark()  # the audit (soname libcuda.so.1): steady state from here
for _ in range(30):  # the checks end (each takes 8 or more executions of its kernel, read as events complete)
    loss = step()
torch.cuda.synchronize()
json.dump({"loss": loss.item()}, open(sys.argv[1], "w"))
"""

TRIAL_SLOTS = 66  # the executions one check times at most (UC_TRIAL_MAX_SLOTS in shim/core/uc_core.h)

MAPPED = (
    "import ctypes; ctypes.CDLL('libcuda.so.1'); "
    "print(next(line.split()[-1] for line in open('/proc/self/maps') if '/libcuda.so' in line))"
)


def _real_driver() -> Path:
    """The file of the real libcuda.so.1, as a process that loads it maps it."""
    found = subprocess.run([sys.executable, "-c", MAPPED], capture_output=True, text=True, timeout=120)
    if found.returncode != 0:
        pytest.skip(f"no CUDA driver to audit: {found.stderr.strip()[-200:]}")
    return Path(found.stdout.strip())


@pytest.mark.parametrize("api", ["graph", "legacy"])
def test_the_real_driver_accepts_every_call_of_the_preload_library(tmp_path: Path, api: str) -> None:
    reason = _torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    audit = build_audit(_real_driver(), tmp_path / "audit")
    script = tmp_path / "net.py"
    script.write_text(SCRIPT)
    record, stats_file = tmp_path / "audit.json", tmp_path / "stats.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
    env |= {"LD_PRELOAD": str(audit), "AUDIT_RECORD": str(record)}  # `ucudnn run` puts the shim in front of it
    if api == "legacy":
        env["TORCH_CUDNN_V8_API_DISABLED"] = "1"
    ucudnn = [sys.executable, "-c", "import sys; from ucudnn.cli import main; sys.exit(main())"]
    run = subprocess.run(
        [*ucudnn, "run", "--workspace", "1MiB", "--database", str(tmp_path / "cache.sqlite"),
         "--stats-file", str(stats_file), "--", sys.executable, str(script), str(tmp_path / "out.json")],
        env=env, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0
    stats = json.loads(stats_file.read_text())
    planned = stats["graph_conv_plans"] if api == "graph" else stats["planned"]
    assert planned > 0 and stats["planner_errors"] == 0, stats
    assert stats["driver_unreachable"] == 0, stats  # every call came from a thread with a current context
    # No call refused, everything given back (a check still running at exit keeps its events: at most two per
    # execution it times), no event read early or recorded in a capture.
    pending = stats["checks_started"] - stats["verified"] + stats["graph_checks_started"] - stats["graph_verified"]
    saw = audited(record, events_held=2 * TRIAL_SLOTS * pending)
    assert sum(saw["calls"].values()) > 0, saw  # the shim reached the driver
    if stats["graph_benchmarks"]:  # engines timed by events, on scratch from cuMemAlloc
        assert saw["allocs"] > 0 and saw["records"] > 0, (stats, saw)
    if stats["checks_started"] or stats["graph_checks_started"]:  # plans checked on PyTorch's executions
        assert saw["records"] > 0 and saw["elapsed_reads"] > 0, (stats, saw)
    assert saw["after_mark"]["allocs"] == saw["after_mark"]["syncs"] == 0, saw  # steady state: neither
    assert math.isfinite(json.loads((tmp_path / "out.json").read_text())["loss"])
