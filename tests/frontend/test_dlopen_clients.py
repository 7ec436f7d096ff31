"""Real clients that reach cuDNN as XLA, ONNX Runtime and PaddlePaddle do: torch_v0 and graph_v1 built with the
frontend's NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING (``torch_v0_dl``, ``graph_v1_dl``; cudnn_calls.h). They link
nothing of cuDNN or the CUDA runtime: they dlopen libcudnn.so.9 RTLD_LOCAL, and NVIDIA's own loader code in the
frontend takes every cuDNN function with dlsym on that handle. The preload library's definitions are never bound
to such a program; it sees the calls only because its dlsym answers those lookups with the hooks
(shim/control/uc_dlsym.c, docs/dlopen.md). The random tier (test_random_problems.py) also draws these builds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests._elf import imports, needed
from ucudnn import _paths

from . import _build
from .conftest import Inputs, Problem, RunClient, base_env
from .test_pressure import CAPACITY, pair, steady_ms
from .test_real_clients import LIMIT, LIMIT_BYTES, LIMITED, V0_OPS, V1_OPS, check_output

pytestmark = pytest.mark.realclient

CASES = [("torch_v0", op) for op in V0_OPS] + [("graph_v1", op) for op in V1_OPS]


@pytest.mark.parametrize("program", _build.PROGRAMS)
def test_the_dlopen_builds_link_nothing_of_cudnn(programs: _build.Programs, program: str) -> None:
    """The _dl programs need no libcudnn and import no cuDNN or CUDA function: every call is a dlsym answer."""
    exe = getattr(programs, f"{program}_dl")
    libs = needed(exe)
    assert libs and not [n for n in libs if n.startswith(("libcudnn", "libcudart"))], libs
    names = imports(exe)
    assert "dlsym" in names, names
    assert not [s for s in names if s.startswith(("cudnn", "cuda"))], names
    # The linked build, for contrast: the same names bound at load time.
    assert "cudnnBackendCreateDescriptor" in imports(getattr(programs, program))


@pytest.mark.parametrize(("program", "op"), CASES)
def test_a_dlopen_client_is_seen_through_dlsym_and_micro_batched_under_a_limit(
    run_client: RunClient, program: str, op: str
) -> None:
    """Alone, the dlopen build runs as the linked one does (the same configs tried, the same engine, bit for bit).
    Under the preload library without a limit nothing changes, yet the graphs are seen -- through dlsym only; under
    an explicit limit they are planned and micro-batched (wgrad: an undivided engine that fits, as linked)."""
    p = Problem(op, **LIMITED)
    inputs = Inputs.make(p)
    extra = ("--calls", "3") + (("--benchmark", "0") if program == "torch_v0" else ())
    linked = run_client(program, p, inputs, extra=extra)
    alone = run_client(f"{program}_dl", p, inputs, extra=extra)
    check_output(alone, p, inputs)
    assert (linked.report["loading"], alone.report["loading"]) == ("linked", "dlopen")
    for key in ("engine", "workspace", "tried", "configs"):
        assert alone.report.get(key) == linked.report.get(key), key
    assert alone.output is not None and linked.output is not None
    assert np.array_equal(alone.output, linked.output)
    assert alone.report["workspace"] > LIMIT_BYTES, alone.report

    same = run_client(f"{program}_dl", p, inputs, preload=True, extra=extra)
    check_output(same, p, inputs)
    assert same.stats["dlsym_hooked"] > 0, same.stats
    assert same.stats["graph_conv_plans"] > 0 and same.stats["graph_split_plans"] == 0, same.stats
    assert same.report["engine"] == alone.report["engine"]
    assert same.output is not None and np.array_equal(same.output, alone.output)

    limited = run_client(f"{program}_dl", p, inputs, preload=True, limit=LIMIT, extra=extra)
    check_output(limited, p, inputs)
    stats = limited.stats
    assert stats["dlsym_hooked"] > 0 and stats["graph_conv_plans"] > 0, stats
    assert stats["planner_errors"] == 0 and stats["rejected_plans"] == 0, stats
    assert limited.report["workspace"] <= LIMIT_BYTES, limited.report
    if op != "wgrad":
        assert stats["graph_split_plans"] > 0 and stats["graph_micro_batches"] > 0, stats


@pytest.mark.parametrize("benchmark", [0, 1], ids=["heuristics", "benchmark"])
@pytest.mark.parametrize("op", ["fprop", "dgrad", "fused"])
def test_a_memory_starved_dlopen_client_runs_the_fast_engine_micro_batched(
    run_client: RunClient, op: str, benchmark: int
) -> None:
    """ucudnn's defaults, no limit of its own: the allocator short of memory, the fast engine's variant offered
    and run micro-batched, faster than alone -- as for the linked build (test_pressure.py)."""
    alone, ucudnn = pair(run_client, "torch_v0_dl", op, CAPACITY, benchmark)
    stats = ucudnn.stats
    assert stats["dlsym_hooked"] > 0, stats
    assert stats["graph_offers"] >= 1 and stats["graph_split_plans"] >= 1 and stats["graph_micro_batches"] > 0, stats
    assert stats["graph_verified"] == 1 and stats["graph_rejected_by_measurement"] == 0, stats
    assert steady_ms(ucudnn) < 0.8 * steady_ms(alone), (steady_ms(ucudnn), steady_ms(alone))


@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_a_memory_starved_dlopen_v1_client_filters_in_the_variant(run_client: RunClient, op: str) -> None:
    """The v1 graph API through dlsym: its workspace filter lets the micro-batched variant in, and it runs faster."""
    alone, ucudnn = pair(run_client, "graph_v1_dl", op, CAPACITY, None)
    assert ucudnn.stats["dlsym_hooked"] > 0, ucudnn.stats
    assert ucudnn.stats["graph_offers"] >= 1 and ucudnn.stats["graph_split_plans"] >= 1, ucudnn.stats
    assert ucudnn.report["workspace"] <= CAPACITY
    assert steady_ms(ucudnn) < 0.8 * steady_ms(alone), (steady_ms(ucudnn), steady_ms(alone))


def test_a_dlopen_client_without_cudnn_says_so(programs: _build.Programs, tmp_path: Path) -> None:
    """Where no libcudnn.so.9 can be found the program reports the loader's error and exits 1, as a framework
    without cuDNN would fail its first convolution; nothing crashes, under the preload library neither."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    cached = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout if Path(ldconfig).exists() else ""
    if "libcudnn.so.9 " in cached:
        pytest.skip("this machine has a libcudnn.so.9 in the loader's cache: the program would find it")
    p = Problem("fprop", n=2)
    inputs = Inputs.make(p)
    inputs.write(tmp_path, p)
    empty = tmp_path / "nolib"
    empty.mkdir()
    cmd = [str(programs.torch_v0_dl), *p.args(), "--data", str(tmp_path), "--capacity", str(1 << 30)]
    for preload in (False, True):
        env = base_env(tmp_path) | {"LD_LIBRARY_PATH": str(empty)}
        if preload:
            env["LD_PRELOAD"] = str(_paths.PRELOAD)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1, (preload, proc.returncode, proc.stdout, proc.stderr)
        assert '"status":"error"' in proc.stdout.replace(" ", "") and "libcudnn.so.9" in proc.stdout, proc.stdout
