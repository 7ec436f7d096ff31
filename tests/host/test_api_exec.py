"""Host backend API: the execution calls' argument checking, alpha/beta semantics and bias-activation.

Each algorithm's numerics are tested against the NumPy reference in test_kernels.py; here one algorithm per op
that every problem supports (algo 0, the direct loops) carries the API-level checks.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ucudnn import cudnn as C
from ucudnn import testing as T

from ._api_cases import status_of

BAD = C.Status.BAD_PARAM
NS = C.Status.NOT_SUPPORTED
SPEC = C.ConvSpec((1, 1))
PARAMS = T.ConvParams.make(2, pad=1)


def arrays(dtype: Any = np.float32, n: int = 2, seed: int = 0) -> tuple[npt.NDArray[Any], ...]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4, 6, 7)).astype(dtype)
    w = rng.standard_normal((6, 4, 3, 3)).astype(dtype)
    y = rng.standard_normal((n, 6, 6, 7)).astype(dtype)
    return x, w, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_alpha_beta(cudnn: C.Cudnn, handle: C.Handle, dtype: Any) -> None:
    x, w, y0 = arrays(dtype)
    y = y0.copy()
    # 0.3 / -1.7 are not representable in float: a double read as float (or the reverse) would be far off.
    cudnn.forward(handle, x, w, SPEC, 0, alpha=0.3, beta=-1.7, y=y)
    T.assert_close(y, T.conv_forward(x, w, PARAMS, alpha=0.3, beta=-1.7, y=y0), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_alpha_beta(cudnn: C.Cudnn, handle: C.Handle, dtype: Any) -> None:
    x, w, dy = arrays(dtype)
    dx0 = np.random.default_rng(1).standard_normal(x.shape).astype(dtype)
    dx = cudnn.backward_data(handle, w, dy, SPEC, 0, dx0.copy(), alpha=-0.7, beta=0.3)
    T.assert_close(dx, T.conv_backward_data(w, dy, PARAMS, x.shape, alpha=-0.7, beta=0.3, dx=dx0), dtype)
    dw0 = np.random.default_rng(2).standard_normal(w.shape).astype(dtype)
    dw = cudnn.backward_filter(handle, x, dy, SPEC, 0, dw0.copy(), alpha=1.3, beta=0.5)
    T.assert_close(dw, T.conv_backward_filter(x, dy, PARAMS, w.shape, alpha=1.3, beta=0.5, dw=dw0), dtype)


def test_beta_zero_ignores_nan_in_output(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, _ = arrays()
    y = np.full((2, 6, 6, 7), np.nan, np.float32)
    cudnn.forward(handle, x, w, SPEC, 0, y=y)
    assert np.isfinite(y).all()


def test_layouts_and_5d_through_the_api(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, _ = arrays(np.float64)
    expected = T.conv_forward(x, w, PARAMS)
    for layout in ("NHWC", "padded", "CNHW"):
        xl = T.to_layout(x, layout)
        yl = T.to_layout(np.zeros(expected.shape), layout)
        wl = T.to_layout(w, "NHWC")
        cudnn.forward(handle, xl, wl, SPEC, 0, y=yl)
        T.assert_close(yl, expected, np.float64, layout)
    rng = np.random.default_rng(3)
    x5 = rng.standard_normal((2, 3, 4, 5, 6))
    w5 = rng.standard_normal((4, 3, 2, 3, 3))
    spec5 = C.ConvSpec((1, 0, 1), (1, 1, 2))
    y5 = cudnn.forward(handle, x5, w5, spec5, 0)
    T.assert_close(y5, T.conv_forward(x5, w5, T.ConvParams.make(3, pad=(1, 0, 1), stride=(1, 1, 2))), np.float64)


def test_bad_arguments_statuses(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, y = arrays()
    f = cudnn.forward
    assert status_of(f, handle, x, w, SPEC, 0, y=np.zeros((2, 6, 6, 6), np.float32)) == BAD  # wrong y shape
    assert status_of(f, handle, x, w, SPEC, 0, y=np.zeros((3, 6, 6, 7), np.float32)) == BAD  # wrong N
    assert status_of(f, handle, x, w, SPEC, 0, y=np.zeros((2, 5, 6, 7), np.float32)) == BAD  # wrong K
    assert status_of(f, handle, x, w.astype(np.float64), SPEC, 0, y=y) == BAD  # mixed types
    assert status_of(f, handle, x, w[:, :3].copy(), SPEC, 0, y=y) == BAD  # C mismatch
    assert status_of(f, handle, x, w, C.ConvSpec((1, 1), groups=3), 0, y=y) == BAD  # groups do not divide C
    w2 = np.ones((6, 2, 3, 3), np.float32)
    assert status_of(f, handle, x, w2, C.ConvSpec((1, 1), groups=2), 0, y=y) == 0
    w5 = np.ones((5, 2, 3, 3), np.float32)
    y5 = np.zeros((2, 5, 6, 7), np.float32)
    assert status_of(f, handle, x, w5, C.ConvSpec((1, 1), groups=2), 0, y=y5) == BAD  # groups do not divide K
    assert status_of(f, handle, x, w, SPEC, 8, y=y) == BAD  # algo outside the enum
    assert status_of(f, handle, x, w, SPEC, -1, y=y) == BAD
    assert status_of(cudnn.backward_data, handle, w, y, SPEC, 6, x.copy()) == BAD
    assert status_of(cudnn.backward_filter, handle, x, y, SPEC, 7, w.copy()) == BAD
    # well-formed but not computed by this backend
    assert status_of(f, handle, x, w, C.ConvSpec((1, 1), compute_type=C.DataType.DOUBLE), 0, y=y) == NS
    # compute types cuDNN does not pair with the data type (HALF: FLOAT or HALF; BFLOAT16: FLOAT only)
    half = C.DataType.HALF
    assert status_of(f, handle, x, w, C.ConvSpec((1, 1), compute_type=half), 0, y=y, workspace=None) == NS
    xh, wh, yh = (a.astype(np.float16) for a in (x, w, y))
    spec_d = C.ConvSpec((1, 1), compute_type=C.DataType.DOUBLE)
    assert status_of(f, handle, xh, wh, spec_d, 0, y=yh, workspace=None) == NS
    xb, wb, yb = (C.bf16_from_float(a) for a in (x, w, y))
    assert status_of(f, handle, xb, wb, C.ConvSpec((1, 1), compute_type=half), 0, y=yb, workspace=None) == NS
    assert status_of(f, handle, xh, wb, SPEC, 0, y=yh) == BAD  # mixed 16-bit types
    x1, w1 = np.ones((2, 4, 9), np.float32), np.ones((6, 4, 3), np.float32)
    assert status_of(f, handle, x1, w1, C.ConvSpec((0,)), 0, y=np.ones((2, 6, 7), np.float32), workspace=None) == NS


def test_null_pointers_and_handle(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, y = arrays()
    one = ctypes.c_float(1.0)
    with (
        C.TensorDesc.of(cudnn, x) as xd,
        C.FilterDesc.of(cudnn, w) as wd,
        C.TensorDesc.of(cudnn, y) as yd,
        C.ConvDesc(cudnn, SPEC) as cd,
    ):

        def fwd(h: Any, alpha: Any, xp: Any, xdesc: Any, yp: Any, beta: Any) -> int:
            return int(
                cudnn.raw.cudnnConvolutionForward(
                    h, alpha, xdesc, xp, wd.ptr, w.ctypes.data, cd.ptr, 0, None, 0, beta, yd.ptr, yp
                )
            )

        ok = (handle.ptr, ctypes.byref(one), x.ctypes.data, xd.ptr, y.ctypes.data, ctypes.byref(one))
        assert fwd(*ok) == 0
        for i, what in enumerate(("handle", "alpha", "x", "x descriptor", "y", "beta")):
            args = list(ok)
            args[i] = None
            assert fwd(*args) == BAD, what
        # a filter descriptor where the x tensor descriptor belongs
        assert fwd(handle.ptr, ctypes.byref(one), x.ctypes.data, wd.ptr, y.ctypes.data, ctypes.byref(one)) == BAD


def test_workspace_checks(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, y = arrays()
    rows = cudnn.get_v7(handle, C.Op.FWD, x, w, y, SPEC)
    needy = [r for r in rows if r.status == 0 and r.memory_bytes > 0]
    assert needy, "some forward algorithm must need a workspace on this problem"
    for r in needy:
        ws = np.zeros(r.memory_bytes, np.uint8)
        assert status_of(cudnn.forward, handle, x, w, SPEC, r.algo, ws[:-1], y=y) == BAD  # one byte short
        assert status_of(cudnn.forward, handle, x, w, SPEC, r.algo, None, y=y, workspace_bytes=r.memory_bytes) == BAD
        assert status_of(cudnn.forward, handle, x, w, SPEC, r.algo, None, y=y) == BAD
        big = np.zeros(r.memory_bytes + 4096, np.uint8)
        out = cudnn.forward(handle, x, w, SPEC, r.algo, big, y=y.copy())
        T.assert_close(out, T.conv_forward(x, w, PARAMS), np.float32, f"algo {r.algo}")


def test_unsupported_algorithms_answer_not_supported(cudnn: C.Cudnn, handle: C.Handle) -> None:
    # Strided, dilated 5x5: no Winograd or FFT-style algorithm takes it.
    x = np.ones((1, 2, 15, 15), np.float32)
    w = np.ones((3, 2, 5, 5), np.float32)
    spec = C.ConvSpec((1, 1), (2, 2), (2, 2))
    y = np.zeros(C.conv_output_shape(x.shape, w.shape, spec.pads, spec.strides, spec.dilations), np.float32)
    for op in C.Op:
        rows = cudnn.get_v7(handle, op, x, w, y, spec)
        unsupported = [r.algo for r in rows if r.status == NS]
        assert unsupported, f"{op.name}: expected some algorithms not to support a strided dilated 5x5"
        for algo in unsupported:
            assert status_of(cudnn.workspace_size, handle, op, x, w, y, spec, algo) == NS
        algo = unsupported[0]
        if op == C.Op.FWD:
            assert status_of(cudnn.forward, handle, x, w, spec, algo, None, y=y) == NS
        elif op == C.Op.BWD_DATA:
            assert status_of(cudnn.backward_data, handle, w, y, spec, algo, x.copy(), None) == NS
        else:
            assert status_of(cudnn.backward_filter, handle, x, y, spec, algo, w.copy(), None) == NS


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", [C.ActivationMode.IDENTITY, C.ActivationMode.RELU])
def test_bias_activation(cudnn: C.Cudnn, handle: C.Handle, dtype: Any, mode: C.ActivationMode) -> None:
    x, w, z = arrays(dtype)
    bias = np.random.default_rng(5).standard_normal((1, 6, 1, 1)).astype(dtype)
    pre = T.conv_forward(x, w, PARAMS, alpha=0.6) + 1.5 * z.astype(np.float64) + bias
    expected = np.maximum(pre, 0) if mode == C.ActivationMode.RELU else pre
    y = cudnn.bias_act_forward(handle, x, w, SPEC, 0, bias, mode, z=z, alpha1=0.6, alpha2=1.5)
    T.assert_close(y, expected, dtype, "z separate")
    # z aliasing y (how frameworks pass it): the prior contents of y are the z term
    y2 = z.copy()
    cudnn.bias_act_forward(handle, x, w, SPEC, 0, bias, mode, alpha1=0.6, alpha2=1.5, y=y2)
    T.assert_close(y2, expected, dtype, "z is y")
    # alpha2 = 0: z is not read at all, NaN in it included
    y3 = cudnn.bias_act_forward(handle, x, w, SPEC, 0, bias, mode, z=np.full_like(z, np.nan), alpha1=0.6)
    pre0 = T.conv_forward(x, w, PARAMS, alpha=0.6) + bias
    T.assert_close(y3, np.maximum(pre0, 0) if mode == C.ActivationMode.RELU else pre0, dtype, "alpha2 = 0")
    if mode == C.ActivationMode.RELU:
        assert (y3 >= 0).all() and (y3 == 0).any()


def test_bias_activation_bad_input(cudnn: C.Cudnn, handle: C.Handle) -> None:
    x, w, z = arrays()
    bias = np.ones((1, 6, 1, 1), np.float32)
    f = cudnn.bias_act_forward
    assert status_of(f, handle, x, w, SPEC, 0, np.ones((1, 5, 1, 1), np.float32)) == BAD
    assert status_of(f, handle, x, w, SPEC, 0, np.ones((2, 6, 1, 1), np.float32)) == BAD
    assert status_of(f, handle, x, w, SPEC, 0, np.ones((1, 6, 1, 1), np.float64)) == BAD
    assert status_of(f, handle, x, w, SPEC, 0, bias, z=z[:, :5].copy(), alpha2=1.0) == BAD
    assert status_of(f, handle, x, w, SPEC, 0, bias, C.ActivationMode.TANH) == NS
    assert status_of(f, handle, x, w, SPEC, 0, bias, C.ActivationMode.SIGMOID) == NS


def test_model_clock_advances_by_modelled_time(cudnn: C.Cudnn, handle: C.Handle) -> None:
    clock = cudnn.real.ucudnn_host_model_clock_ms
    clock.restype = ctypes.c_double
    clock.argtypes = []
    x, w, y = arrays()
    row = next(r for r in cudnn.get_v7(handle, C.Op.FWD, x, w, y, SPEC) if r.algo == 0)
    before = clock()
    cudnn.forward(handle, x, w, SPEC, 0, y=y)
    assert clock() - before == pytest.approx(row.time_ms, rel=1e-6)
    before = clock()
    assert status_of(cudnn.forward, handle, x, w, SPEC, 9, y=y) == BAD
    assert clock() == before  # failed calls cost nothing
