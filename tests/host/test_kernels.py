"""Every compute kernel of the host backend against the NumPy reference (ucudnn.testing).

The kernels run directly through tests/host/_kernel_harness.py (below the cuDNN API layer), so any strides can
be fed to them. Tolerances (ucudnn.testing.tolerance): float32 rtol 1e-4 with atol 1e-4 x max|expected|;
float64 rtol 1e-10 with atol 1e-10 x max|expected|.

16-bit data (float16, bfloat16) is covered by test_kernels_16bit.py with the same harness.

Every run uses a workspace of exactly the reported size placed at the start of a larger buffer whose tail is a
random canary: the canary must survive (nothing past the reported size is touched) and the result must be right
(the reported size is enough). With beta == 0 the output is pre-filled with NaN (it must not be read).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.host._kernel_harness import BWD_DATA, BWD_FILTER, FWD, OP_NAMES, OPS, AlgoInfo, KernelLib
from ucudnn import testing as T

CANARY = 256
FILTER_LAYOUTS: tuple[T.Layout, ...] = ("NCHW", "NHWC")


@pytest.fixture(scope="module")
def lib() -> KernelLib:
    return KernelLib()


_LIB: KernelLib | None = None


def _lib() -> KernelLib:
    global _LIB
    if _LIB is None:
        _LIB = KernelLib()
    return _LIB


def all_algos() -> Iterator[Any]:
    for op in OPS:
        for a in _lib().algos(op):
            yield pytest.param(a, id=f"{OP_NAMES[op]}-{a.name}")


def reference(
    op: int,
    prob: T.ConvProblem,
    x: npt.NDArray[Any],
    w: npt.NDArray[Any],
    y: npt.NDArray[Any],
    alpha: float,
    beta: float,
) -> T.FloatArray:
    if op == FWD:
        return T.conv_forward(x, w, prob.params, alpha=alpha, beta=beta, y=y)
    if op == BWD_DATA:
        return T.conv_backward_data(w, y, prob.params, prob.x_shape, alpha=alpha, beta=beta, dx=x)
    return T.conv_backward_filter(x, y, prob.params, prob.w_shape, alpha=alpha, beta=beta, dw=w)


def run_checked(
    lib: KernelLib,
    algo: AlgoInfo,
    prob: T.ConvProblem,
    dtype: npt.DTypeLike,
    *,
    layout: T.Layout = "NCHW",
    w_layout: T.Layout = "NCHW",
    alpha: float = 1.0,
    beta: float = 0.0,
    seed: int = 0,
) -> bool:
    """Run one algorithm and compare with the reference; False if the algorithm does not support the problem."""
    rng = np.random.default_rng(seed)
    x = T.to_layout(rng.standard_normal(prob.x_shape), layout, dtype)
    w = T.to_layout(rng.standard_normal(prob.w_shape), w_layout, dtype)
    y = T.to_layout(rng.standard_normal(prob.y_shape), layout, dtype)
    ws = lib.workspace(algo.op, algo.index, x, w, y, prob.params)
    if ws is None:
        return False
    expected = reference(algo.op, prob, x, w, y, alpha, beta)
    out = {FWD: y, BWD_DATA: x, BWD_FILTER: w}[algo.op]
    if beta == 0.0:
        out[...] = 0x7FC0 if np.dtype(dtype) == T.BFLOAT16 else np.nan  # bfloat16 bit patterns: a quiet NaN
    buf = np.empty(ws + CANARY, dtype=np.uint8)
    canary = rng.integers(0, 256, CANARY, dtype=np.uint8)
    buf[ws:] = canary
    status = lib.run(algo.op, algo.index, x, w, y, prob.params, alpha=alpha, beta=beta, workspace=buf[:ws])
    assert status == 0
    assert np.array_equal(buf[ws:], canary), f"{algo.name} wrote past its reported workspace of {ws} bytes"
    T.assert_close(out, expected, dtype, f"{OP_NAMES[algo.op]} {algo.name} {prob} {layout}/{w_layout}")
    return True


def problem(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int = 1, cross: bool = True, **kw: Any
) -> T.ConvProblem:
    params = T.ConvParams.make(len(x_shape) - 2, groups=groups, cross_correlation=cross, **kw)
    return T.ConvProblem(x_shape, w_shape, params)


# A 3x3 stride-1 problem with groups, so every algorithm (Winograd included) runs on it.
BASE = problem((2, 4, 6, 7), (6, 2, 3, 3), groups=2, pad=1)

SHAPES = {
    "stride2-pad2-5x5": problem((2, 3, 9, 8), (4, 3, 5, 5), pad=2, stride=2),
    "dilation2": problem((1, 3, 9, 10), (2, 3, 3, 3), dilation=2, pad=(1, 2)),
    "mixed-per-dim": problem((2, 2, 8, 11), (3, 2, 2, 3), pad=(1, 0), stride=(2, 3), dilation=(3, 1)),
    "convolution-mode": problem((2, 4, 6, 7), (6, 2, 3, 3), groups=2, pad=1, cross=False),
    "convolution-mode-strided": problem((2, 3, 7, 7), (2, 3, 3, 2), pad=(1, 0), stride=2, cross=False),
    "1x1": problem((3, 8, 5, 5), (4, 8, 1, 1)),
    "depthwise": problem((2, 4, 6, 6), (4, 1, 3, 3), groups=4, pad=1),
    "wide-row": problem((1, 2, 3, 600), (3, 2, 3, 3), pad=(1, 1)),
    "wide-row-strided": problem((1, 2, 2, 700), (2, 2, 1, 3), stride=(1, 2), dilation=(1, 2)),
    "pad0-3x3": problem((2, 3, 7, 6), (2, 3, 3, 3)),
    "pad2-3x3": problem((1, 3, 5, 4), (2, 3, 3, 3), pad=2),
    "3d": problem((2, 2, 4, 5, 6), (3, 2, 2, 3, 3), pad=(1, 1, 0), stride=(1, 2, 1)),
    "3d-groups-convmode": problem((1, 4, 5, 4, 5), (4, 2, 3, 2, 3), groups=2, pad=1, dilation=(1, 2, 1), cross=False),
    "many-channels": problem((2, 64, 6, 6), (16, 64, 3, 3), pad=1),
    # FFT's narrowest transforms, one and two columns wide, on odd row counts (two real rows share a transform)
    "one-column": problem((2, 3, 5, 1), (2, 3, 2, 1)),
    "two-columns": problem((1, 2, 3, 2), (3, 2, 3, 2), pad=(1, 0)),
    # FFT_TILING's tiles: 3 x 2 of 28 x 28 outputs on 32-point transforms, the last ones short; a filter past 16 on
    # 64-point transforms; an image past ALGO_FFT's 256 (and "wide-row" above, 600 columns)
    "tiles": problem((2, 4, 70, 45), (6, 2, 5, 5), groups=2, pad=2),
    "tiles-large-filter": problem((1, 2, 40, 50), (3, 2, 17, 20), pad=(3, 8)),
    "tiles-past-256": problem((1, 2, 300, 9), (2, 2, 3, 2), pad=(1, 0)),
}


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("w_layout", FILTER_LAYOUTS)
def test_layouts(lib: KernelLib, algo: AlgoInfo, dtype: type, layout: T.Layout, w_layout: T.Layout) -> None:
    assert run_checked(lib, algo, BASE, dtype, layout=layout, w_layout=w_layout, alpha=1.0, beta=0.0)


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shapes(lib: KernelLib, algo: AlgoInfo, dtype: type, shape: str) -> None:
    prob = SHAPES[shape]
    supported = run_checked(lib, algo, prob, dtype, layout="NCHW", w_layout="NCHW", alpha=0.75, beta=0.5)
    if not supported:
        assert "WINOGRAD" in algo.name or algo.name.startswith("FFT"), f"{algo.name} must support every shape"
        plain = prob.params.nb_spatial == 2 and prob.params.stride == (1, 1) and prob.params.dilation == (1, 1)
        dims = list(zip(prob.params.pad, prob.w_shape[2:], prob.x_shape[2:], strict=True))
        if algo.name == "FFT":  # padding below the filter's extent and at most 256 padded, as cuDNN's FFT
            fits = all(p < r and h + 2 * p <= 256 and h + r - 1 <= 256 for p, r, h in dims)
            assert not (plain and fits), "FFT must support 2-D stride-1 undilated problems that fit its transforms"
        elif algo.name == "FFT_TILING":  # any image size; filters up to 32
            fits = all(p < r <= 32 for p, r, _ in dims)
            assert not (plain and fits), "FFT_TILING must support 2-D stride-1 undilated filters up to 32"
        else:
            assert not (plain and prob.w_shape[2:] == (3, 3)), "Winograd must support 2-D 3x3 stride-1 problems"


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize("w_layout", FILTER_LAYOUTS)
def test_taps_wholly_in_the_padding(lib: KernelLib, algo: AlgoInfo, w_layout: T.Layout) -> None:
    """Dilated taps that fall entirely in the padding, on a row shorter than the padding: the column rows of
    such taps hold zeros only and must not spill into the next row (found by test_random_problems: GEMM with
    an NHWC filter zeroed the row of the next channel's tap)."""
    for prob in (
        problem((1, 2, 1, 1), (1, 2, 1, 3), pad=(0, 2), dilation=(1, 2)),
        problem((2, 8, 3, 1), (4, 4, 2, 3), groups=2, pad=(0, 2), stride=(2, 1), dilation=(1, 2)),
    ):
        supported = run_checked(lib, algo, prob, np.float32, w_layout=w_layout, alpha=1.25, seed=159)
        assert supported or "WINOGRAD" in algo.name or algo.name.startswith("FFT")


@pytest.mark.parametrize("algo", list(all_algos()))
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (-2.0, 0.0), (1.0, 1.0), (0.5, -1.5)])
def test_alpha_beta(lib: KernelLib, algo: AlgoInfo, alpha: float, beta: float) -> None:
    check_alpha_beta(lib, algo, alpha, beta, ((np.float32, "NHWC"), (np.float64, "padded")))


def check_alpha_beta(
    lib: KernelLib, algo: AlgoInfo, alpha: float, beta: float, cases: tuple[tuple[Any, T.Layout], ...]
) -> None:
    """The scaling factors on BASE, for each (data type, tensor layout) of ``cases`` with an NHWC filter."""
    for dtype, layout in cases:
        assert run_checked(lib, algo, BASE, dtype, layout=layout, w_layout="NHWC", alpha=alpha, beta=beta)


# What test_random_problems draws besides the data type: seed, spatial dims, layouts, beta.
RANDOM_PROBLEMS = {
    "seed": st.integers(0, 2**32 - 1),
    "nb_spatial": st.sampled_from([2, 2, 3]),
    "layout": st.sampled_from(T.LAYOUTS),
    "w_layout": st.sampled_from(FILTER_LAYOUTS),
    "beta": st.sampled_from([0.0, 0.5]),
}


@pytest.mark.parametrize("op", OPS, ids=[OP_NAMES[o] for o in OPS])
@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64]), **RANDOM_PROBLEMS)
def test_random_problems(
    op: int, seed: int, nb_spatial: int, layout: T.Layout, w_layout: T.Layout, dtype: type, beta: float
) -> None:
    check_random_problem(op, seed, nb_spatial, layout, w_layout, dtype, beta)


def check_random_problem(
    op: int, seed: int, nb_spatial: int, layout: T.Layout, w_layout: T.Layout, dtype: Any, beta: float
) -> None:
    """Every algorithm of ``op`` on a random problem: right where it runs (only Winograd and FFT may refuse)."""
    lib = _lib()
    prob = T.random_problem(np.random.default_rng(seed), nb_spatial=nb_spatial)
    for algo in lib.algos(op):
        supported = run_checked(
            lib, algo, prob, dtype, layout=layout, w_layout=w_layout, alpha=1.25, beta=beta, seed=seed
        )
        assert supported or "WINOGRAD" in algo.name or algo.name.startswith("FFT")


def workspace_of(lib: KernelLib, algo: AlgoInfo, prob: T.ConvProblem, dtype: Any = np.float32) -> int | None:
    x: npt.NDArray[Any] = np.zeros(prob.x_shape, dtype)
    w: npt.NDArray[Any] = np.zeros(prob.w_shape, dtype)
    y: npt.NDArray[Any] = np.zeros(prob.y_shape, dtype)
    return lib.workspace(algo.op, algo.index, x, w, y, prob.params)


@pytest.mark.parametrize("algo", list(all_algos()))
def test_workspace_sizes(lib: KernelLib, algo: AlgoInfo) -> None:
    """The trade-off the planner relies on: zero / N-independent / linear-in-N workspaces, exact im2col sizes."""

    def at(n: int, dtype: type = np.float32) -> int:
        ws = workspace_of(lib, algo, problem((n, 8, 10, 10), (16, 4, 3, 3), groups=2, pad=1), dtype)
        assert ws is not None
        return ws

    sizes = [at(n) for n in (1, 2, 4, 8)]
    kind = {
        "IMPLICIT_GEMM": "zero",
        "ALGO_0": "zero",
        "IMPLICIT_PRECOMP_GEMM": "constant",
        "ALGO_3": "constant",
        "GEMM": "linear",
        "ALGO_1": "linear",
        "WINOGRAD_NONFUSED": "linear",
        "FFT": "linear",  # the batch's spectra, beside the filters' (a constant part)
        "FFT_TILING": "linear",  # the same, of one tile
    }[algo.name]
    if kind == "zero":
        assert sizes == [0, 0, 0, 0]
    elif kind == "constant":
        assert sizes[0] > 0 and len(set(sizes)) == 1
    else:
        steps = {b - a for a, b in itertools.pairwise(sizes)}
        assert sizes[0] > 0 and sizes[1] > sizes[0] and sizes[3] - sizes[2] == 2 * (sizes[2] - sizes[1]), sizes
        assert len(steps) == 3  # strictly linear growth: the steps double with the doubling N
    if algo.name in ("GEMM", "ALGO_1") and algo.op != BWD_FILTER:
        # NCHW packed: im2col of the batch for one group, nothing else: N * (C/g) * R * S * P * Q elements.
        for n in (1, 8):
            assert at(n) == n * 4 * 9 * 100 * 4
            assert at(n, np.float64) == n * 4 * 9 * 100 * 8


def test_winograd_limits(lib: KernelLib) -> None:
    unsupported = [
        problem((1, 2, 8, 8), (2, 2, 5, 5), pad=2),
        problem((1, 2, 8, 8), (2, 2, 3, 3), stride=2),
        problem((1, 2, 9, 9), (2, 2, 3, 3), dilation=2),
        problem((1, 2, 4, 8, 8), (2, 2, 3, 3, 3), pad=1),
    ]
    for op in OPS:
        wino = [a for a in lib.algos(op) if a.name == "WINOGRAD_NONFUSED"]
        assert len(wino) == 1
        for prob in unsupported:
            assert workspace_of(lib, wino[0], prob) is None, prob


def test_fft_tiling_workspace(lib: KernelLib) -> None:
    """FFT_TILING's spectra are one tile's: its workspace stays the same as the image grows, where ALGO_FFT's
    grows with the padded image and stops at 256; on an image that fits one tile the two are the same."""
    for op in OPS:
        fft, tiled = ({a.name: a for a in lib.algos(op)}[name] for name in ("FFT", "FFT_TILING"))

        def sizes(algo: AlgoInfo, r: int, side: int) -> int | None:
            return workspace_of(lib, algo, problem((4, 8, side, side), (16, 8, r, r), pad=r // 2))

        # one 32 x 32 tile (a 3x3 filter) or one 64 x 64 tile (a filter past 16): the same transforms as ALGO_FFT
        assert sizes(tiled, 3, 28) == sizes(fft, 3, 28)
        assert sizes(tiled, 17, 40) == sizes(fft, 17, 40)
        small, large = sizes(tiled, 3, 60), sizes(tiled, 3, 220)
        assert small is not None and small == large == sizes(tiled, 3, 1000)
        fft_small, fft_large = sizes(fft, 3, 60), sizes(fft, 3, 220)
        assert fft_small is not None and fft_large is not None and small < fft_small < fft_large
        assert sizes(fft, 3, 300) is None  # past 256 padded
        assert sizes(tiled, 32, 100) is not None and sizes(tiled, 33, 100) is None  # filters up to 32
        for prob in (
            problem((1, 2, 40, 40), (2, 2, 3, 3), stride=2),
            problem((1, 2, 40, 40), (2, 2, 3, 3), dilation=2),
            problem((1, 2, 40, 40), (2, 2, 3, 3), pad=3),
            problem((1, 2, 8, 8, 8), (2, 2, 3, 3, 3), pad=1),
        ):
            assert workspace_of(lib, tiled, prob) is None, prob


def test_tables(lib: KernelLib) -> None:
    counts = {FWD: 8, BWD_DATA: 6, BWD_FILTER: 7}
    for op in OPS:
        algos = lib.algos(op)
        assert len(algos) >= 3
        numbers = [a.algo for a in algos]
        assert len(set(numbers)) == len(numbers) and all(0 <= n < counts[op] for n in numbers)
        assert 0 in numbers and 1 in numbers
        # The zero-workspace algorithm is the slowest in the timing model.
        rates = {a.algo: a.model_rate for a in algos}
        assert rates[0] == min(rates.values())
    nondet = {(a.op, a.algo) for op in OPS for a in lib.algos(op) if not a.deterministic}
    assert nondet == {(BWD_DATA, 0), (BWD_FILTER, 0)}


@pytest.mark.parametrize("algo", list(all_algos()))
def test_repeatability(lib: KernelLib, algo: AlgoInfo) -> None:
    """Deterministic algorithms are bitwise repeatable; the others at least agree to the tolerance."""
    prob = problem((4, 8, 9, 9), (12, 8, 3, 3), pad=1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(prob.x_shape).astype(np.float32)
    w = rng.standard_normal(prob.w_shape).astype(np.float32)
    y = rng.standard_normal(prob.y_shape).astype(np.float32)
    check_repeatable(lib, algo, prob, (x, w, y), np.float32, runs=5)


def check_repeatable(
    lib: KernelLib, algo: AlgoInfo, prob: T.ConvProblem, xwy: tuple[Any, Any, Any], dtype: Any, *, runs: int
) -> None:
    """``runs`` runs of ``algo`` from the same inputs (beta 0.5): bitwise equal outputs for a deterministic
    algorithm, equal to the tolerance of ``dtype`` otherwise."""
    x, w, y = xwy
    ws = workspace_of(lib, algo, prob, dtype)
    assert ws is not None
    results = []
    for _ in range(runs):
        xx, ww, yy = x.copy(), w.copy(), y.copy()
        lib.run(algo.op, algo.index, xx, ww, yy, prob.params, beta=0.5, workspace=np.empty(ws, np.uint8))
        results.append({FWD: yy, BWD_DATA: xx, BWD_FILTER: ww}[algo.op])
    for r in results[1:]:
        if algo.deterministic:
            assert np.array_equal(r, results[0])
        else:
            T.assert_close(r, results[0], dtype)
