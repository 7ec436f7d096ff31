"""Host backend API: algorithm counts, Get*_v7, Find*, Find*Ex and workspace queries; the timing model."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

from ucudnn import cudnn as C

BAD = C.Status.BAD_PARAM
NS = C.Status.NOT_SUPPORTED
SPEC = C.ConvSpec((1, 1), math_type=C.MathType.TENSOR_OP)


def problem(n: int = 4, dtype: Any = np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 8, 12, 12)).astype(dtype)
    w = rng.standard_normal((16, 8, 3, 3)).astype(dtype)
    return x, w, np.zeros((n, 16, 12, 12), dtype)


def check_rows(op: C.Op, rows: list[C.Perf], requested: int | None = None) -> None:
    count = C.ALGO_COUNT[op]
    assert len(rows) == min(requested or count, count)
    if requested is None:
        assert sorted(r.algo for r in rows) == list(range(count)), "every enum value once"
    ok = [r for r in rows if r.status == 0]
    assert rows[: len(ok)] == ok, "successful rows first"
    assert [r.time_ms for r in ok] == sorted(r.time_ms for r in ok), "fastest first"
    assert all(r.time_ms >= 0 for r in ok)
    for r in rows:
        assert r.math_type == C.MathType.TENSOR_OP  # the descriptor's math type is reported
        assert r.determinism in (0, 1)
        if r.status == NS:
            assert (r.time_ms, r.memory_bytes) == (-1.0, 0)


def test_max_counts(cudnn: C.Cudnn, handle: C.Handle) -> None:
    names = ("Forward", "BackwardData", "BackwardFilter")
    for op, name in zip(C.Op, names, strict=True):
        fn = getattr(cudnn.raw, f"cudnnGetConvolution{name}AlgorithmMaxCount")
        out = ctypes.c_int()
        assert fn(handle.ptr, ctypes.byref(out)) == 0 and out.value == C.ALGO_COUNT[op]
        assert fn(None, ctypes.byref(out)) == BAD
        assert fn(handle.ptr, None) == BAD


@pytest.mark.parametrize("op", list(C.Op))
def test_get_v7_and_find_are_well_formed(cudnn: C.Cudnn, handle: C.Handle, op: C.Op) -> None:
    x, w, y = problem()
    v7 = cudnn.get_v7(handle, op, x, w, y, SPEC)
    check_rows(op, v7)
    assert any(r.status == 0 for r in v7)
    for r in v7:
        if r.status == 0:
            assert cudnn.workspace_size(handle, op, x, w, y, SPEC, r.algo) == r.memory_bytes
    found = cudnn.find(handle, op, x, w, y, SPEC)
    check_rows(op, found)
    assert {r.algo for r in found if r.status == 0} == {r.algo for r in v7 if r.status == 0}
    check_rows(op, cudnn.get_v7(handle, op, x, w, y, SPEC, requested=2), requested=2)
    check_rows(op, cudnn.find(handle, op, x, w, y, SPEC, requested=1), requested=1)


@pytest.mark.parametrize("op", list(C.Op))
def test_find_ex_with_small_workspace(cudnn: C.Cudnn, handle: C.Handle, op: C.Op) -> None:
    x, w, y = problem()
    need = {r.algo: r.memory_bytes for r in cudnn.get_v7(handle, op, x, w, y, SPEC) if r.status == 0}
    sizes = sorted(set(need.values()))
    assert len(sizes) >= 2, "algorithms with different workspace needs are required for this test"
    offered = sizes[-1] - 1  # everything but the hungriest fits
    out = {C.Op.FWD: y, C.Op.BWD_DATA: x, C.Op.BWD_FILTER: w}[op]
    out[...] = np.nan
    rows = cudnn.find(handle, op, x, w, y, SPEC, ex=True, workspace=np.zeros(offered, np.uint8))
    check_rows(op, rows)
    for r in rows:
        if r.algo not in need:
            assert r.status == NS
        elif need[r.algo] > offered:
            assert r.status not in (0, NS) and r.memory_bytes == need[r.algo]
        else:
            assert r.status == 0 and r.memory_bytes == need[r.algo]
    assert np.isfinite(out).all(), "FindEx ran the algorithms on the caller's output buffer"


def test_search_bad_input(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, y = problem()
    r = cudnn.raw
    with (
        C.TensorDesc.of(cudnn, x) as xd,
        C.FilterDesc.of(cudnn, w) as wd,
        C.TensorDesc.of(cudnn, y) as yd,
        C.ConvDesc(cudnn, SPEC) as cd,
    ):
        rows = (C.PerfStruct * 8)()
        got = ctypes.c_int(-5)
        d = (xd.ptr, wd.ptr, cd.ptr, yd.ptr)
        for fn in (r.cudnnGetConvolutionForwardAlgorithm_v7, r.cudnnFindConvolutionForwardAlgorithm):
            got.value = -5
            assert fn(handle.ptr, *d, 0, ctypes.byref(got), rows) == BAD and got.value == 0
            got.value = -5
            assert fn(None, *d, 8, ctypes.byref(got), rows) == BAD and got.value == 0
            assert fn(handle.ptr, *d, 8, None, rows) == BAD
            got.value = -5
            assert fn(handle.ptr, *d, 8, ctypes.byref(got), None) == BAD and got.value == 0
            got.value = -5
            assert fn(handle.ptr, xd.ptr, wd.ptr, cd.ptr, xd.ptr, 8, ctypes.byref(got), rows) == BAD  # y shape
            assert got.value == 0
        ex = r.cudnnFindConvolutionForwardAlgorithmEx
        args = [
            handle.ptr,
            xd.ptr,
            x.ctypes.data,
            wd.ptr,
            w.ctypes.data,
            cd.ptr,
            yd.ptr,
            y.ctypes.data,
            8,
            ctypes.byref(got),
            rows,
            None,
            0,
        ]
        assert ex(*args) == 0 and got.value == 8
        for i in (2, 4, 7):  # x, w, y data pointers
            bad = list(args)
            bad[i] = None
            assert ex(*bad) == BAD
        bad = list(args)
        bad[12] = 1024  # a size without a workspace
        assert ex(*bad) == BAD
        size = ctypes.c_size_t()
        assert r.cudnnGetConvolutionForwardWorkspaceSize(handle.ptr, *d, 8, ctypes.byref(size)) == BAD
        assert r.cudnnGetConvolutionForwardWorkspaceSize(handle.ptr, *d, 0, None) == BAD
        assert r.cudnnGetConvolutionForwardWorkspaceSize(None, *d, 0, ctypes.byref(size)) == BAD


def test_unsupported_problem_gives_all_rows_not_supported(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, y = problem()  # FLOAT data with a HALF compute type: well-formed, no cuDNN configuration
    spec = C.ConvSpec((1, 1), math_type=C.MathType.TENSOR_OP, compute_type=C.DataType.HALF)
    for op in C.Op:
        rows = cudnn.get_v7(handle, op, x, w, y, spec)
        check_rows(op, rows)
        assert all(r.status == NS for r in rows)
        assert all(r.status == NS for r in cudnn.find(handle, op, x, w, y, spec))


MODEL_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from ucudnn import cudnn as C
    cd = C.load(sys.argv[1])
    out = {}
    with cd.handle() as h:
        spec = C.ConvSpec((1, 1))
        for n in map(int, sys.argv[2].split(",")):
            x = np.zeros((n, 8, 12, 12), np.float32)
            w = np.zeros((16, 8, 3, 3), np.float32)
            y = np.zeros((n, 16, 12, 12), np.float32)
            for op in C.Op:
                rows = [cd.find(h, op, x, w, y, spec) for _ in range(2)]
                rows.append(cd.get_v7(h, op, x, w, y, spec))
                rows.append(cd.find(h, op, x, w, y, spec, ex=True, workspace=np.zeros(1 << 22, np.uint8)))
                out[f"{op.name}/{n}"] = [[[r.algo, r.status, r.time_ms, r.memory_bytes] for r in rs] for rs in rows]
    print(json.dumps(out))
    """
)


def run_model_script(lib: str, timing: str, batches: str) -> tuple[dict[str, Any], str]:
    env = dict(os.environ, UCUDNN_HOST_TIMING=timing)
    proc = subprocess.run(
        [sys.executable, "-c", MODEL_SCRIPT, lib, batches],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout), proc.stderr


def test_model_timing(host_lib_path: str) -> None:
    results, stderr = run_model_script(host_lib_path, "model", "1,4,64")
    assert stderr == ""
    for key, (find1, find2, v7, find_ex) in results.items():
        assert find1 == find2 == v7 == find_ex, f"{key}: modelled times must be identical on every call"
        ok = [r for r in find1 if r[1] == 0]
        assert len(ok) >= 2, key
        # FFT (fwd 4, bwd 2) holds the filters' spectra whatever N, as cuDNN's: on this small 3x3 layer it is the
        # hungriest and not the fastest; FFT_TILING (fwd 5, bwd data 3, bwd filter 6) is the same here, on one
        # tile. Among the others speed costs memory.
        fft = {"FWD": (4, 5), "BWD_DATA": (2, 3), "BWD_FILTER": (2, 6)}[key.split("/")[0]]
        assert all(any(r[0] == a for r in ok) for a in fft) and ok[0][0] not in fft, key
        by_algo = {r[0]: r for r in ok}
        assert by_algo[fft[0]][2:] == by_algo[fft[1]][2:], f"{key}: one tile is ALGO_FFT's transform"
        rest = [r for r in ok if r[0] not in fft]
        assert rest[0][3] == max(r[3] for r in rest), f"{key}: the fastest algorithm is the workspace-hungriest"
        assert ok[-1][3] == min(r[3] for r in ok), f"{key}: the slowest needs the least workspace"
    for op in C.Op:
        per_sample = []
        for n in (1, 4, 64):
            best = results[f"{op.name}/{n}"][0][0]
            per_sample.append(best[2] / n)
        # small micro-batches cost more per sample, as on a GPU
        assert per_sample[0] > per_sample[1] > per_sample[2], op.name


def test_bad_timing_value_warns_and_measures(host_lib_path: str) -> None:
    results, stderr = run_model_script(host_lib_path, "fast", "4")
    assert "UCUDNN_HOST_TIMING" in stderr and "measure" in stderr and "model" in stderr
    assert stderr.count("UCUDNN_HOST_TIMING") == 1, "read once per process"
    find1, _, v7, _ = results["FWD/4"]
    assert any(a != b for a, b in zip(find1, v7, strict=True)), "measured, not modelled, times"


FIND_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from ucudnn import cudnn as C
    cd = C.load(sys.argv[1])
    x = np.zeros((4, 8, 12, 12), np.float32)
    w = np.zeros((16, 8, 3, 3), np.float32)
    y = np.zeros((4, 16, 12, 12), np.float32)
    out = {}
    with cd.handle() as h:
        spec = C.ConvSpec((1, 1))
        for op in C.Op:
            try:
                rows = cd.find(h, op, x, w, y, spec)
                out[op.name] = [[r.algo, r.status, r.memory_bytes] for r in rows]
            except C.CudnnError as exc:
                out[op.name] = exc.status
            ex = cd.find(h, op, x, w, y, spec, ex=True, workspace=np.zeros(1 << 22, np.uint8))
            out[op.name + "/ex"] = [[r.algo, r.status, r.memory_bytes] for r in ex]
    print(json.dumps(out))
    """
)


def run_find_memory(lib: str, memory: str) -> tuple[dict[str, Any], str]:
    env = dict(os.environ, UCUDNN_HOST_TIMING="model", UCUDNN_HOST_FIND_MEMORY=memory)
    proc = subprocess.run([sys.executable, "-c", FIND_MEMORY_SCRIPT, lib], env=env, capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    return json.loads(proc.stdout), proc.stderr


def test_find_allocates_within_the_device_memory_it_is_given(host_lib_path: str) -> None:
    # The problem's tensors: x 18432 B, w 4608 B, y 36864 B (float32), 59904 B in all.
    tensors = 4 * (4 * 8 * 144 + 16 * 8 * 9 + 4 * 16 * 144)
    roomy, _ = run_find_memory(host_lib_path, "")
    fail = C.Status.INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
    for op in C.Op:
        ran = {a: ws for a, st, ws in roomy[op.name] if st == 0}
        sizes = sorted(set(ran.values()))
        assert len(sizes) >= 2 and sizes[0] == 0, (op.name, ran)
        device = tensors + sizes[-1] - 1  # every workspace but the largest fits beside the tensors
        bounded, stderr = run_find_memory(host_lib_path, str(device))
        assert stderr == ""
        for algo, status, ws in bounded[op.name]:
            if algo in ran:
                assert (status, ws) == ((fail, ran[algo]) if ran[algo] > sizes[-1] - 1 else (0, ran[algo])), op.name
        # Find*Ex allocates nothing: the caller's buffers and workspace, whatever the device has free.
        assert bounded[op.name + "/ex"] == roomy[op.name + "/ex"]
        # Tensors that do not fit fail the call.
        starved, _ = run_find_memory(host_lib_path, str(tensors - 1))
        assert starved[op.name] == fail
    bad = run_find_memory(host_lib_path, "4MiB")
    assert "UCUDNN_HOST_FIND_MEMORY='4MiB'" in bad[1] and "bytes" in bad[1]
    assert all(isinstance(bad[0][op.name], list) for op in C.Op), "a bad value bounds nothing"
