"""Host backend API on HALF and BFLOAT16 data: the cuDNN configurations accepted, every algorithm through the
whole API (descriptors, checks, dispatch), float scaling factors, Find/Get rows, workspace queries and
bias-activation. BFLOAT16 arrays are uint16 bit patterns (ucudnn.cudnn.bf16_from_float). Tolerances:
ucudnn.testing.tolerance (float16 rtol 1e-3, atol 5e-3 x magnitude; bfloat16 rtol 8e-3, atol 2e-2 x magnitude:
outputs are rounded to 16 bits, see test_kernels_16bit.py).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ucudnn import cudnn as C
from ucudnn import testing as T

from ._api_cases import CASES, run_with_reference, spec_of, status_of

BAD = C.Status.BAD_PARAM
NS = C.Status.NOT_SUPPORTED
PARAMS = T.ConvParams.make(2, pad=1)
FLOAT, HALF, BF16 = C.DataType.FLOAT, C.DataType.HALF, C.DataType.BFLOAT16

# (NumPy storage dtype, compute type): cuDNN's PSEUDO_HALF, TRUE_HALF and PSEUDO_BFLOAT16 configurations.
CONFIGS: list[Any] = [
    pytest.param(np.float16, FLOAT, id="half-float-compute"),
    pytest.param(np.float16, HALF, id="half-half-compute"),
    pytest.param(T.BFLOAT16, FLOAT, id="bf16-float-compute"),
]


def arrays(dtype: Any, n: int = 2, seed: int = 0) -> tuple[npt.NDArray[Any], ...]:
    rng = np.random.default_rng(seed)
    shapes = ((n, 4, 6, 7), (6, 4, 3, 3), (n, 6, 6, 7))
    return tuple(T.to_layout(rng.standard_normal(s), "NCHW", dtype) for s in shapes)


def test_default_compute_type_is_float_for_16bit(cudnn: C.Cudnn) -> None:
    for dt, want in ((HALF, FLOAT), (BF16, FLOAT), (FLOAT, FLOAT), (C.DataType.DOUBLE, C.DataType.DOUBLE)):
        assert C.default_compute_type(dt) == want
        with C.ConvDesc(cudnn, C.ConvSpec((1, 1)), dt) as cd:
            assert cd.get().compute_type == want
    assert C.dtype_of(np.zeros(1, np.float16)) == HALF and C.dtype_of(np.zeros(1, np.uint16)) == BF16
    with C.TensorDesc.of(cudnn, np.zeros((2, 3, 4, 5), np.uint16)) as td:
        assert td.get()[0] == BF16 and td.size_in_bytes() == 2 * 2 * 3 * 4 * 5


@pytest.mark.parametrize(("dtype", "compute"), CONFIGS)
@pytest.mark.parametrize("op", list(C.Op), ids=lambda o: o.name)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_every_algorithm(
    cudnn: C.Cudnn, handle: C.Handle, dtype: Any, compute: C.DataType, op: C.Op, case: str, layout: T.Layout
) -> None:
    prob = CASES[case]
    spec = spec_of(prob.params, compute)
    rng = np.random.default_rng(3)
    x0, w0, y0 = (rng.standard_normal(s) for s in (prob.x_shape, prob.w_shape, prob.y_shape))
    alpha, beta = 1.5, 0.25
    ran = 0
    for algo in range(C.ALGO_COUNT[op]):
        x, w, y = (T.to_layout(a, layout, dtype) for a in (x0, w0, y0))
        try:
            size = cudnn.workspace_size(handle, op, x, w, y, spec, algo)
        except C.CudnnError as e:
            assert e.status == NS
            continue
        ws = np.empty(size, np.uint8)
        got, expected = run_with_reference(cudnn, handle, op, prob, spec, algo, x, w, y, ws, alpha, beta)
        assert got.dtype == np.dtype(dtype)
        T.assert_close(got, expected, dtype, f"{op.name} algo {algo}")
        ran += 1
    assert ran >= 3 if case == "2d-groups-3x3" else ran >= 2


@pytest.mark.parametrize(("dtype", "compute"), CONFIGS)
def test_scaling_factors_are_float(cudnn: C.Cudnn, handle: C.Handle, dtype: Any, compute: C.DataType) -> None:
    """alpha/beta are read as float for 16-bit data: raw calls with c_float pointers give the right result
    (0.3 and -1.7 are not float-representable pairs of a double, and a double read would be garbage)."""
    x, w, y0 = arrays(dtype)
    spec = C.ConvSpec((1, 1), compute_type=compute)
    y = y0.copy()
    with (
        C.TensorDesc.of(cudnn, x) as xd,
        C.FilterDesc.of(cudnn, w) as wd,
        C.TensorDesc.of(cudnn, y) as yd,
        C.ConvDesc(cudnn, spec, C.dtype_of(x)) as cd,
    ):
        a, b = ctypes.c_float(0.3), ctypes.c_float(-1.7)
        st = cudnn.raw.cudnnConvolutionForward(
            handle.ptr,
            ctypes.byref(a),
            xd.ptr,
            x.ctypes.data,
            wd.ptr,
            w.ctypes.data,
            cd.ptr,
            0,
            None,
            0,
            ctypes.byref(b),
            yd.ptr,
            y.ctypes.data,
        )
    assert st == 0
    T.assert_close(y, T.conv_forward(x, w, PARAMS, alpha=0.3, beta=-1.7, y=y0), dtype)


@pytest.mark.parametrize(("dtype", "compute"), CONFIGS)
def test_find_and_get_rows(cudnn: C.Cudnn, handle: C.Handle, dtype: Any, compute: C.DataType) -> None:
    """Every implemented algorithm answers for 16-bit data, with the workspace the size query reports."""
    x, w, y = arrays(dtype, n=4)
    spec = C.ConvSpec((1, 1), compute_type=compute)
    for op in C.Op:
        for rows in (cudnn.get_v7(handle, op, x, w, y, spec), cudnn.find(handle, op, x, w, y, spec)):
            ok = [r for r in rows if r.status == 0]
            assert len(ok) >= 3, rows
            for r in ok:
                assert r.memory_bytes == cudnn.workspace_size(handle, op, x, w, y, spec, r.algo)
        ws = np.empty(1 << 20, np.uint8)  # Find*Ex overwrites the op's output: run on copies
        ex_rows = cudnn.find(handle, op, x.copy(), w.copy(), y.copy(), spec, ex=True, workspace=ws)
        assert sum(r.status == 0 for r in ex_rows) >= 3


def test_unsupported_pairings(cudnn: C.Cudnn, handle: C.Handle) -> None:
    """Well-formed but no cuDNN configuration: NOT_SUPPORTED; mixed data types: BAD_PARAM."""
    xh, wh, yh = arrays(np.float16)
    xb, wb, yb = arrays(T.BFLOAT16)
    xf, wf, yf = arrays(np.float32)
    f = cudnn.forward
    assert status_of(f, handle, xh, wh, C.ConvSpec((1, 1), compute_type=C.DataType.DOUBLE), 0, y=yh) == NS
    assert status_of(f, handle, xb, wb, C.ConvSpec((1, 1), compute_type=HALF), 0, y=yb) == NS
    assert status_of(f, handle, xf, wf, C.ConvSpec((1, 1), compute_type=HALF), 0, y=yf) == NS
    assert status_of(f, handle, xh, wb, C.ConvSpec((1, 1)), 0, y=yh) == BAD
    assert status_of(f, handle, xh, wf, C.ConvSpec((1, 1)), 0, y=yh) == BAD
    assert status_of(f, handle, xb, wb, C.ConvSpec((1, 1)), 0, y=yh) == BAD
    # a BFLOAT16 compute type is refused by the descriptor setter itself (as the real library does)
    with pytest.raises(C.CudnnError) as e:
        C.ConvDesc(cudnn, C.ConvSpec((1, 1), compute_type=BF16))
    assert e.value.status == BAD


@pytest.mark.parametrize("dtype", [np.float16, T.BFLOAT16], ids=["half", "bf16"])
@pytest.mark.parametrize("mode", [C.ActivationMode.IDENTITY, C.ActivationMode.RELU])
def test_bias_activation(cudnn: C.Cudnn, handle: C.Handle, dtype: Any, mode: C.ActivationMode) -> None:
    """y = act(alpha1 * conv + alpha2 * z + bias) for 16-bit data; y is rounded twice (after the convolution and
    after the bias), both within the tolerance's two roundings."""
    x, w, z = arrays(dtype)
    bias = T.to_layout(np.random.default_rng(5).standard_normal((1, 6, 1, 1)), "NCHW", dtype)
    spec = C.ConvSpec((1, 1))
    pre = T.conv_forward(x, w, PARAMS, alpha=0.6) + 1.5 * T.as_float64(z) + T.as_float64(bias)
    expected = np.maximum(pre, 0) if mode == C.ActivationMode.RELU else pre
    for algo in (0, 1, 2):
        y = cudnn.bias_act_forward(handle, x, w, spec, algo, bias, mode, z=z, alpha1=0.6, alpha2=1.5)
        T.assert_close(y, expected, dtype, f"algo {algo}, z separate")
        y2 = z.copy()
        cudnn.bias_act_forward(handle, x, w, spec, algo, bias, mode, alpha1=0.6, alpha2=1.5, y=y2)
        assert np.array_equal(y2, y), "z aliasing y gives the same bits"
