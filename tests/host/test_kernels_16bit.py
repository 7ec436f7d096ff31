"""Every compute kernel of the host backend on HALF and BFLOAT16 data against the NumPy reference.

16-bit data is computed in float and rounded to 16 bits on store (see shim/host/kernels/hb_kern.h). The reference reads
the same 16-bit inputs exactly (bfloat16 travels as uint16 bit patterns, ``ucudnn.testing.BFLOAT16``) and
computes in float64, so the differences are the output rounding: ``ucudnn.testing.tolerance`` --
float16 rtol 1e-3 with atol 5e-3 x max|expected|, bfloat16 rtol 8e-3 with atol 2e-2 x max|expected| (the
atomics-based ALGO_0s round their running sums on every add, up to 9 times).

As in test_kernels.py every run's workspace is exactly the reported size with a canary after it, so the
conversion buffers the GEMM algorithms need are proven to be counted in their workspace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.host._kernel_harness import BWD_DATA, BWD_FILTER, FWD, OP_NAMES, OPS, AlgoInfo, KernelLib
from tests.host.test_kernels import (
    BASE,
    FILTER_LAYOUTS,
    RANDOM_PROBLEMS,
    SHAPES,
    all_algos,
    check_alpha_beta,
    check_random_problem,
    check_repeatable,
    problem,
    run_checked,
    workspace_of,
)
from ucudnn import cudnn as C
from ucudnn import testing as T

DTYPES16: list[Any] = [pytest.param(np.float16, id="half"), pytest.param(T.BFLOAT16, id="bf16")]


@pytest.fixture(scope="module")
def lib() -> KernelLib:
    return KernelLib()


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize("dtype", DTYPES16)
@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("w_layout", FILTER_LAYOUTS)
def test_layouts(lib: KernelLib, algo: AlgoInfo, dtype: Any, layout: T.Layout, w_layout: T.Layout) -> None:
    assert run_checked(lib, algo, BASE, dtype, layout=layout, w_layout=w_layout, alpha=1.0, beta=0.0)


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize("dtype", DTYPES16)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shapes(lib: KernelLib, algo: AlgoInfo, dtype: Any, shape: str) -> None:
    prob = SHAPES[shape]
    supported = run_checked(lib, algo, prob, dtype, layout="NCHW", w_layout="NCHW", alpha=0.75, beta=0.5)
    assert supported or "WINOGRAD" in algo.name or algo.name.startswith("FFT")


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (-2.0, 0.0), (1.0, 1.0), (0.5, -1.5)])
def test_alpha_beta(lib: KernelLib, algo: AlgoInfo, alpha: float, beta: float) -> None:
    check_alpha_beta(lib, algo, alpha, beta, ((np.float16, "NHWC"), (T.BFLOAT16, "padded")))


@pytest.mark.parametrize("op", OPS, ids=[OP_NAMES[o] for o in OPS])
@settings(max_examples=15, deadline=None)
@given(dtype=st.sampled_from([np.dtype(np.float16), T.BFLOAT16]), **RANDOM_PROBLEMS)
def test_random_problems(
    op: int, seed: int, nb_spatial: int, layout: T.Layout, w_layout: T.Layout, dtype: Any, beta: float
) -> None:
    check_random_problem(op, seed, nb_spatial, layout, w_layout, dtype, beta)


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize("dtype", DTYPES16)
def test_workspace_sizes(lib: KernelLib, algo: AlgoInfo, dtype: Any) -> None:
    """What each algorithm converts through, counted exactly: direct loops convert on the fly (no workspace);
    the precomputed-table, Winograd and FFT algorithms already work in float buffers (same size as for FLOAT data);
    the GEMM algorithms add float copies of the filter group, of dy or of the output, on top of the float im2col.
    Problem: N x 8 x 10 x 10, filter 16 x 4 x 3 x 3, 2 groups, pad 1 (per group: C/g = 4, K/g = 8, C/g * taps =
    36, 100 positions)."""

    def at(n: int, dt: Any = dtype) -> int:
        ws = workspace_of(lib, algo, problem((n, 8, 10, 10), (16, 4, 3, 3), groups=2, pad=1), dt)
        assert ws is not None
        return ws

    col = 36 * 100 * 4  # float im2col bytes per sample (a multiple of 64: no alignment padding)
    wconv = 8 * 36 * 4  # float copy of one group's filter [K/g x C/g * taps]
    tile = 8 * 100 * 4  # float [K/g x positions] staging tile of one sample
    expected: Callable[[int], int] = {
        (FWD, "IMPLICIT_GEMM"): lambda n: 0,
        (FWD, "IMPLICIT_PRECOMP_GEMM"): lambda n: at(n, np.float32),
        (FWD, "WINOGRAD_NONFUSED"): lambda n: at(n, np.float32),
        (FWD, "GEMM"): lambda n: n * col + wconv + tile,
        (BWD_DATA, "ALGO_0"): lambda n: 0,
        (BWD_DATA, "WINOGRAD_NONFUSED"): lambda n: at(n, np.float32),
        (BWD_DATA, "ALGO_1"): lambda n: n * col + wconv + tile + n * 4 * 100 * 4,  # + float dx of one group
        (BWD_FILTER, "ALGO_0"): lambda n: 0,
        (BWD_FILTER, "ALGO_1"): lambda n: n * col + n * tile + wconv,  # batch im2col, dy copy, float dw
        (BWD_FILTER, "ALGO_3"): lambda n: col + tile + wconv,
        (BWD_FILTER, "WINOGRAD_NONFUSED"): lambda n: at(n, np.float32),
        (FWD, "FFT"): lambda n: at(n, np.float32),
        (BWD_DATA, "FFT"): lambda n: at(n, np.float32),
        (BWD_FILTER, "FFT"): lambda n: at(n, np.float32),
        (FWD, "FFT_TILING"): lambda n: at(n, np.float32),
        (BWD_DATA, "FFT_TILING"): lambda n: at(n, np.float32),
        (BWD_FILTER, "FFT_TILING"): lambda n: at(n, np.float32),
    }[(algo.op, algo.name)]
    for n in (1, 2, 5):
        assert at(n) == expected(n), (n, at(n), expected(n))


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize("dtype", DTYPES16)
def test_repeatability(lib: KernelLib, algo: AlgoInfo, dtype: Any) -> None:
    """Deterministic algorithms are bitwise repeatable on 16-bit data too; the others agree to the tolerance."""
    prob = problem((4, 8, 9, 9), (12, 8, 3, 3), pad=1)
    rng = np.random.default_rng(1)
    x, w, y = (T.to_layout(rng.standard_normal(s), "NCHW", dtype) for s in (prob.x_shape, prob.w_shape, prob.y_shape))
    check_repeatable(lib, algo, prob, (x, w, y), dtype, runs=4)


@pytest.mark.parametrize("dtype", DTYPES16)
def test_single_round_to_nearest_even(lib: KernelLib, dtype: Any) -> None:
    """Output rounding is exactly one round-to-nearest-even of the float result: with one input channel and a
    1x1 filter of 1.0 every output is alpha * x + beta * y computed in float, so the stored 16-bit values must be
    bitwise those of NumPy's rounding (float16 cast; bf16_from_float for bfloat16) -- ties included."""
    prob = problem((2, 1, 16, 16), (1, 1, 1, 1))
    rng = np.random.default_rng(7)
    x = T.to_layout(rng.standard_normal(prob.x_shape), "NCHW", dtype)
    y0 = T.to_layout(rng.standard_normal(prob.y_shape), "NCHW", dtype)
    w = T.to_layout(np.ones(prob.w_shape), "NCHW", dtype)
    alpha, beta = np.float32(1.0 + 2.0**-9), np.float32(0.375)
    xf, yf = (T.as_float64(a).astype(np.float32) for a in (x, y0))
    exact = alpha * xf + beta * yf  # float32 arithmetic, as the kernels do
    want = exact.astype(np.float16) if np.dtype(dtype) == np.float16 else C.bf16_from_float(exact)
    checked = 0
    for algo in lib.algos(FWD):
        ws = workspace_of(lib, algo, prob, dtype)
        if ws is None:
            continue
        y = y0.copy()
        assert (
            lib.run(
                FWD,
                algo.index,
                x,
                w,
                y,
                prob.params,
                alpha=float(alpha),
                beta=float(beta),
                workspace=np.empty(ws, np.uint8),
            )
            == 0
        )
        assert np.array_equal(y.view(np.uint16), want.view(np.uint16)), algo.name
        checked += 1
    assert checked >= 3


def test_bf16_helpers_round_to_nearest_even() -> None:
    """bf16_from_float (used by the tests to make inputs and expectations) against hand-checked bit patterns."""
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -3.5, np.inf, 0.0, -0.0], np.float32)
    bits = C.bf16_from_float(values)
    assert bits.tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC060, 0x7F80, 0x0000, 0x8000]
    assert np.isnan(C.bf16_to_float(C.bf16_from_float(np.array([np.nan], np.float32))))[0]
    assert C.bf16_to_float(bits[:5]).tolist() == [1.0, 1.0, 1 + 2**-6, 1 + 2**-7, -3.5]
    every = np.arange(0, 2**16, dtype=np.uint32).astype(np.uint16)
    finite = every[np.isfinite(C.bf16_to_float(every))]
    assert np.array_equal(C.bf16_from_float(C.bf16_to_float(finite)), finite)  # exact round trip


@pytest.mark.parametrize("dtype", DTYPES16)
def test_every_16bit_value_round_trips(lib: KernelLib, dtype: Any) -> None:
    """All 65536 bit patterns through y = 1 * x (a 1x1 filter of 1.0): the load conversion is exact for every
    value (subnormals and infinities included) and the store rounds it back to itself; NaN stays NaN (signalling
    ones come back quiet, as IEEE arithmetic makes them) and -0 comes back as +0 (the float sum starts at +0)."""
    prob = problem((1, 1, 256, 256), (1, 1, 1, 1))
    x = np.arange(2**16, dtype=np.uint32).astype(np.uint16).reshape(prob.x_shape)
    if np.dtype(dtype) == np.float16:
        x = x.view(np.float16)
    w = T.to_layout(np.ones(prob.w_shape), "NCHW", dtype)
    with np.errstate(invalid="ignore"):  # casting signalling NaNs
        values = T.as_float64(x)
    nan = np.isnan(values)
    neg_zero = x.view(np.uint16) == 0x8000
    same = ~nan & ~neg_zero
    for algo in lib.algos(FWD):
        ws = workspace_of(lib, algo, prob, dtype)
        if ws is None or algo.name.startswith("FFT"):  # a transform mixes a plane: one infinity makes all of it NaN
            continue
        y = np.zeros(prob.y_shape, x.dtype)
        assert lib.run(FWD, algo.index, x, w, y, prob.params, workspace=np.empty(ws, np.uint8)) == 0
        assert np.array_equal(y.view(np.uint16)[same], x.view(np.uint16)[same]), algo.name
        with np.errstate(invalid="ignore"):
            out = T.as_float64(y)
        assert np.isnan(out[nan]).all() and (y.view(np.uint16)[neg_zero] == 0).all(), algo.name
