"""JAX under ``ucudnn run`` on a real GPU (marker ``gpu``; ``../shared/GPU.md``'s ``bench-jax`` phase runs the same
kind of step by hand).

XLA's CUDA plugin dlopens cuDNN RTLD_LOCAL and looks every function up with ``dlsym(handle, name)``: the preload
library sees its calls only through its dlsym. A small convolution training step (two convolutions, value and
gradient, jitted) must give the results JAX gives alone, the shim must have answered XLA's lookups of hooked names
and seen its calls (legacy or graph API, whichever XLA makes), and under an explicit 8 MiB limit it must have
planned what it saw. The stats are printed, so the run reports what XLA calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = r"""
import json, sys
import jax, jax.numpy as jnp
from jax import lax
k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
x = jax.random.normal(k1, (64, 32, 28, 28), jnp.float32)
w1 = jax.random.normal(k2, (64, 32, 3, 3), jnp.float32) * 0.05
w2 = jax.random.normal(k3, (32, 64, 3, 3), jnp.float32) * 0.05
def loss(ws, x):
    h = jax.nn.relu(lax.conv_general_dilated(x, ws[0], (1, 1), "SAME"))
    return jnp.mean(lax.conv_general_dilated(h, ws[1], (1, 1), "SAME") ** 2)
step = jax.jit(jax.value_and_grad(loss))
for _ in range(2):
    v, g = step((w1, w2), x)
    v.block_until_ready()
json.dump({"loss": float(v), "grads": [float(jnp.linalg.norm(d)) for d in g],
           "devices": [d.platform for d in jax.devices()]}, open(sys.argv[1], "w"))
"""


NO_JAX_GPU = "JAX with its CUDA plugin (a GPU backend) is not installed"


def run_step(tmp_path: Path, name: str, ucudnn_args: list[str] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """SCRIPT alone (ucudnn_args None) or under ``ucudnn run ucudnn_args``: its results, and the shim's stats. Run
    alone first, it is also the probe (no process of its own: each starts JAX on the GPU, seconds): where JAX is not
    installed, or runs on no GPU, the test skips with NO_JAX_GPU."""
    script = tmp_path / "step.py"
    script.write_text(SCRIPT)
    out, stats_file = tmp_path / f"{name}.json", tmp_path / f"{name}.stats.json"
    cmd = [sys.executable, str(script), str(out)]
    if ucudnn_args is not None:
        ucudnn = [sys.executable, "-c", "import sys; from ucudnn.cli import main; sys.exit(main())"]
        cmd = [*ucudnn, "run", *ucudnn_args, "--database", str(tmp_path / "cache.sqlite"), "--stats-file",
               str(stats_file), "--", *cmd]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if ucudnn_args is None and proc.returncode != 0 and "No module named 'jax" in proc.stderr:
        pytest.skip(NO_JAX_GPU)
    assert proc.returncode == 0, proc.stderr[-4000:]
    stats: dict[str, Any] = json.loads(stats_file.read_text()) if ucudnn_args is not None else {}
    if stats:
        seen = {k: v for k, v in stats.items() if isinstance(v, int) and v}
        print(f"{name}: what the shim saw of XLA: {json.dumps(seen)}; stderr tail: {proc.stderr[-600:]}")
    return json.loads(out.read_text()), stats


def test_jax_convolutions_reach_ucudnn_through_dlsym(tmp_path: Path) -> None:
    alone, _ = run_step(tmp_path, "alone", None)
    if "gpu" not in alone["devices"]:
        pytest.skip(NO_JAX_GPU)
    for name, args in (("defaults", []), ("limit", ["--workspace", "8MiB"])):
        got, stats = run_step(tmp_path, name, args)
        # XLA's autotuner may pick other algorithms (and TF32 rounds): the same results, up to rounding.
        assert got["loss"] == pytest.approx(alone["loss"], rel=1e-2)
        assert got["grads"] == pytest.approx(alone["grads"], rel=1e-2)
        assert stats["dlsym_hooked"] > 0, stats  # XLA's lookups of hooked names were answered with the hooks
        assert stats["calls"] + stats["queries"] + stats["graph_calls"] > 0, stats
        if name == "limit":
            assert stats["kernels"] + stats["graph_conv_plans"] > 0, stats  # what it saw, it planned
