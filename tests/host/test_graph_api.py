"""Host backend graph (backend) API: convolution graphs built the way cudnn_frontend builds them (graph_driver.c)
against the NumPy reference -- every engine of every op, NCHW/NHWC/padded strides, groups, stride, dilation,
convolution mode, 3-D, double and half -- plus the heuristics' ranking, engine workspaces and numerical notes
against the legacy API's answers for the same algorithms, the model clock, and the fused conv + add + bias + relu
graph PyTorch builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ucudnn import cudnn as C
from ucudnn import testing as T

from . import _graph as G
from ._api_cases import CASES, spec_of, status_of

FWD, BWD_DATA, BWD_FILTER = 0, 1, 2
OPS = (FWD, BWD_DATA, BWD_FILTER)
NONDETERMINISTIC = {(BWD_DATA, 0), (BWD_FILTER, 0)}
WINOGRAD = {(FWD, 7), (BWD_DATA, 5), (BWD_FILTER, 5)}
FFT = {(FWD, 4), (FWD, 5), (BWD_DATA, 2), (BWD_DATA, 3), (BWD_FILTER, 2), (BWD_FILTER, 6)}  # ALGO_FFT, FFT_TILING
ALPHA, BETA = 0.7, 0.3
# x, w, y of one problem
Arrays = tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]


@pytest.fixture(scope="module")
def driver(host_lib_path: str) -> G.Driver:
    return G.Driver(Path(host_lib_path))


def arrays(problem: T.ConvProblem, dtype: Any, layouts: tuple[T.Layout, T.Layout, T.Layout], seed: int = 0) -> Arrays:
    """x, w, y of the forward problem in the given layouts (values in [-1, 1), quarter steps in 16 bits)."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, layout in zip((problem.x_shape, problem.w_shape, problem.y_shape), layouts, strict=True):
        a = rng.uniform(-1, 1, shape)
        if np.dtype(dtype).itemsize == 2:
            a = np.round(a * 4) / 4
        out.append(T.to_layout(a, layout, dtype))
    return out[0], out[1], out[2]


def reference(
    op: int, x: Any, w: Any, y: Any, params: T.ConvParams, prior: Any, alpha: float, beta: float
) -> npt.NDArray[Any]:
    if op == FWD:
        return T.conv_forward(x, w, params, alpha=alpha, beta=beta, y=prior)
    if op == BWD_DATA:
        return T.conv_backward_data(w, y, params, x.shape, alpha=alpha, beta=beta, dx=prior)
    return T.conv_backward_filter(x, y, params, w.shape, alpha=alpha, beta=beta, dw=prior)


def output_index(op: int) -> int:
    """Which of (x, w, y) the op writes."""
    return {FWD: 2, BWD_DATA: 0, BWD_FILTER: 1}[op]


def clone(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A copy with the same strides, gaps included (ndarray.copy would pack it)."""
    span = sum((n - 1) * st for n, st in zip(a.shape, a.strides, strict=True)) + a.itemsize
    buf = np.full(span // a.itemsize, np.nan, a.dtype)
    out: npt.NDArray[Any] = np.lib.stride_tricks.as_strided(buf, a.shape, a.strides)
    out[...] = a
    return out


def run_checked(
    driver: G.Driver,
    op: int,
    arrs: Arrays,
    params: T.ConvParams,
    *,
    alpha: float = ALPHA,
    beta: float = BETA,
    **kw: Any,
) -> tuple[G.Outcome, npt.NDArray[Any], npt.NDArray[Any]]:
    """Run op in place on copies of (x, w, y); returns the outcome, the output and the reference."""
    x, w, y = (clone(a) for a in arrs)
    bufs = [x, w, y]
    out = bufs[output_index(op)]
    prior = out.copy()
    outcome = driver.run(op, x, w, y, params, alpha=alpha, beta=beta, **kw)
    expected = reference(op, *arrs, params, prior, alpha, beta)
    return outcome, out, expected


LAYOUTS: dict[str, tuple[T.Layout, T.Layout, T.Layout]] = {
    "NCHW": ("NCHW", "NCHW", "NCHW"),
    "NHWC": ("NHWC", "NHWC", "NHWC"),
    "padded-x-y": ("padded", "NCHW", "NHWC-padded"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("op", OPS)
def test_every_engine_is_its_legacy_algorithm(
    cudnn: C.Cudnn, handle: C.Handle, driver: G.Driver, op: int, case: str, layout: str
) -> None:
    """Engine i of an op's graph is legacy algorithm i: supported exactly when the legacy workspace query is, with
    that workspace, its notes, its modelled time on the model clock, and results matching the reference."""
    problem = CASES[case]
    arrs = arrays(problem, np.float32, LAYOUTS[layout])
    x, w, y = arrs
    spec = spec_of(problem.params)
    v7 = {p.algo: p for p in cudnn.get_v7(handle, C.Op(op), x, w, y, spec) if p.status == 0}
    ran = 0
    for engine in range(C.ALGO_COUNT[C.Op(op)]):
        outcome, out, expected = run_checked(driver, op, arrs, problem.params, engine=engine)
        assert outcome.global_count == C.ALGO_COUNT[C.Op(op)]
        legacy = status_of(cudnn.workspace_size, handle, C.Op(op), x, w, y, spec, engine)
        if legacy != 0:
            assert legacy == C.Status.NOT_SUPPORTED
            assert (outcome.status, outcome.stage) == (3000, "engine"), f"engine {engine}"
            continue
        ran += 1
        assert (outcome.status, outcome.stage) == (0, "ok"), f"engine {engine}: {outcome}"
        ws = cudnn.workspace_size(handle, C.Op(op), x, w, y, spec, engine)
        assert outcome.engine == engine
        assert outcome.workspace == outcome.cfg_workspace == ws
        notes = set(outcome.notes)
        assert (G.NOTE_NONDETERMINISTIC in notes) == ((op, engine) in NONDETERMINISTIC)
        assert (G.NOTE_WINOGRAD in notes) == ((op, engine) in WINOGRAD)
        assert (G.NOTE_FFT in notes) == ((op, engine) in FFT)
        assert G.NOTE_DOWN_CONVERT not in notes and G.NOTE_REDUCED_PRECISION not in notes
        assert outcome.model_ms == pytest.approx(v7[engine].time_ms, rel=1e-6)
        T.assert_close(out, expected, np.float32, f"{case} op {op} engine {engine} {layout}")
    assert ran >= 2


@pytest.mark.parametrize("op", OPS)
def test_filter_strides_the_backend_cannot_take_leave_no_engine(driver: G.Driver, op: int) -> None:
    """A packed filter in another order than NCHW or NHWC (here C, K, R, S) finalizes and leaves no engine; one
    with gaps between its elements is refused by the operation, as the real library refuses it."""
    problem = CASES["2d-groups-3x3"]
    x, w, y = arrays(problem, np.float32, ("NCHW", "CNHW", "NCHW"))
    outcome = driver.run(op, x, w, y, problem.params, engine=0)
    assert outcome.global_count == 0
    assert (outcome.status, outcome.stage) == (3000, "engine")
    assert driver.run(op, x, w, y, problem.params).stage == "heur"  # no result to take
    x, w, y = arrays(problem, np.float32, ("NCHW", "padded", "NCHW"))
    refused = driver.run(op, x, w, y, problem.params, engine=0)
    assert (refused.status, refused.stage) == (2000, "op")


@pytest.mark.parametrize("mode", [G.HEUR_A, G.HEUR_INSTANT, 1])
@pytest.mark.parametrize("op", OPS)
def test_heuristics_rank_engines_by_the_timing_model(
    cudnn: C.Cudnn, handle: C.Handle, driver: G.Driver, op: int, mode: int
) -> None:
    """The heuristics list every supported engine in the order Get*_v7 ranks the algorithms (the timing model),
    and each configuration they return builds a plan that computes the convolution."""
    problem = CASES["2d-groups-3x3"]
    arrs = arrays(problem, np.float32, LAYOUTS["NHWC"])
    expected_order = [p.algo for p in cudnn.get_v7(handle, C.Op(op), *arrs, spec_of(problem.params)) if p.status == 0]
    first = driver.run(op, *arrs, problem.params, heur_mode=mode, execute=False)
    assert first.status == 0
    assert first.heuristics == expected_order
    for rank, engine in enumerate(first.heuristics):
        outcome, out, expected = run_checked(driver, op, arrs, problem.params, heur_mode=mode, heur_rank=rank)
        assert (outcome.status, outcome.engine) == (0, engine)
        T.assert_close(out, expected, np.float32, f"op {op} heuristic result {rank} (engine {engine})")


@pytest.mark.parametrize("op", OPS)
def test_fallback_lists_the_engines_needing_least_workspace(
    cudnn: C.Cudnn, handle: C.Handle, driver: G.Driver, op: int
) -> None:
    """FALLBACK is not INSTANT again: a short list in global-index order of the engines whose algorithm needs the
    least workspace (none, where any needs none), each of which computes the convolution."""
    problem = CASES["2d-groups-3x3"]
    arrs = arrays(problem, np.float32, LAYOUTS["NHWC"])
    spec = spec_of(problem.params)
    listed = [p for p in cudnn.get_v7(handle, C.Op(op), *arrs, spec) if p.status == 0]
    least = min(p.memory_bytes for p in listed)
    instant = driver.run(op, *arrs, problem.params, heur_mode=G.HEUR_INSTANT, execute=False).heuristics
    fallback = driver.run(op, *arrs, problem.params, heur_mode=G.HEUR_FALLBACK, execute=False)
    assert fallback.status == 0
    assert fallback.heuristics == sorted(p.algo for p in listed if p.memory_bytes == least)
    assert set(fallback.heuristics) < set(instant), (fallback.heuristics, instant)
    for rank, engine in enumerate(fallback.heuristics):
        outcome, out, expected = run_checked(
            driver, op, arrs, problem.params, heur_mode=G.HEUR_FALLBACK, heur_rank=rank
        )
        assert (outcome.status, outcome.engine, outcome.cfg_workspace) == (0, engine, least)
        T.assert_close(out, expected, np.float32, f"op {op} fallback result {rank} (engine {engine})")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("op", OPS)
def test_double_and_half(driver: G.Driver, op: int, dtype: Any, case: str) -> None:
    problem = CASES[case]
    arrs = arrays(problem, dtype, LAYOUTS["NCHW"], seed=3)
    engines = driver.run(op, *arrs, problem.params, execute=False).heuristics
    assert engines
    for rank, engine in enumerate(engines):
        outcome, out, expected = run_checked(driver, op, arrs, problem.params, heur_rank=rank)
        assert outcome.status == 0, outcome
        notes = set(outcome.notes)
        reduced = dtype == np.float16 and (op, engine) in NONDETERMINISTIC
        assert (G.NOTE_REDUCED_PRECISION in notes) == reduced
        T.assert_close(out, expected, dtype, f"{case} op {op} engine {engine}")


# ---- the fused graph PyTorch builds for cudnn_convolution_add_relu ----
def fused_inputs(
    problem: T.ConvProblem, dtype: Any, layout: T.Layout
) -> tuple[Arrays, npt.NDArray[Any], npt.NDArray[Any]]:
    arrs = arrays(problem, dtype, (layout, layout, layout), seed=5)
    rng = np.random.default_rng(6)
    z = T.to_layout(np.round(rng.uniform(-1, 1, problem.y_shape) * 4) / 4, layout, dtype)
    k = problem.y_shape[1]
    bias = (np.round(rng.uniform(-1, 1, (1, k) + (1,) * (len(problem.y_shape) - 2)) * 4) / 4).astype(dtype)
    return arrs, z, bias


def fused_reference(
    arrs: tuple[npt.NDArray[Any], ...], z: Any, bias: Any, params: T.ConvParams, z_alpha: float
) -> npt.NDArray[Any]:
    conv = T.conv_forward(arrs[0], arrs[1], params, alpha=ALPHA)
    out: npt.NDArray[Any] = np.maximum(conv + z_alpha * T.as_float64(z) + T.as_float64(bias), 0.0)
    return out


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_conv_add_bias_relu(
    cudnn: C.Cudnn, handle: C.Handle, driver: G.Driver, case: str, layout: T.Layout
) -> None:
    """y = relu(alpha * conv(x, w) + z_alpha * z + bias[1,K,1,1]) with virtual intermediates, every forward
    engine: the convolution's virtual output is the workspace beyond the algorithm's (64-byte aligned)."""
    problem = CASES[case]
    arrs, z, bias = fused_inputs(problem, np.float32, layout)
    spec = spec_of(problem.params)
    expected = fused_reference(arrs, z, bias, problem.params, 0.5)
    y_bytes = int(np.prod(problem.y_shape)) * 4
    ran = 0
    for engine in [-1, *range(C.ALGO_COUNT[C.Op.FWD])]:
        x, w, y = (clone(a) for a in arrs)
        y[...] = np.nan  # the output's prior contents play no part
        outcome = driver.run(FWD, x, w, y, problem.params, alpha=ALPHA, engine=engine, fused=(z, bias, 0.5))
        assert outcome.global_count == C.ALGO_COUNT[C.Op.FWD]
        if engine >= 0 and status_of(cudnn.workspace_size, handle, C.Op.FWD, *arrs, spec, engine) != 0:
            assert (outcome.status, outcome.stage) == (3000, "engine")
            continue
        assert outcome.status == 0, outcome
        ran += 1
        ws = cudnn.workspace_size(handle, C.Op.FWD, *arrs, spec, outcome.engine)
        assert outcome.workspace == (ws + 63) // 64 * 64 + y_bytes
        T.assert_close(y, expected, np.float32, f"{case} {layout} engine {engine}")
    assert ran >= 3


def test_fused_half_keeps_the_float_intermediate(driver: G.Driver) -> None:
    """16-bit data with float virtual tensors (PyTorch's fused graphs): every engine computes the convolution's
    result in float, as cuDNN's fused engines keep it, so none notes DOWN_CONVERT_INPUTS (PyTorch drops those). A
    result past half's range that the residual add brings back comes out finite: rounded to half it would be
    infinite. A virtual half result is half, and a virtual double one is rounded first, which the notes say."""
    problem = CASES["2d-groups-3x3"]
    arrs, z, bias = fused_inputs(problem, np.float16, "NCHW")
    expected = fused_reference(arrs, z, bias, problem.params, 0.5)
    ran = 0
    for engine in [-1, *range(C.ALGO_COUNT[C.Op.FWD])]:
        x, w, y = (clone(a) for a in arrs)
        outcome = driver.run(FWD, x, w, y, problem.params, alpha=ALPHA, engine=engine, fused=(z, bias, 0.5))
        if outcome.status == 3000 and outcome.stage == "engine":
            continue
        assert outcome.status == 0, (engine, outcome)
        ran += 1
        assert G.NOTE_DOWN_CONVERT not in outcome.notes, (engine, outcome.notes)
        T.assert_close(y, expected, np.float16, f"engine {engine}")
    assert ran >= 3

    # x = w = 32 and alpha 4: 4 * 1024 * (taps in range) * 2 channels, up to 73728 (past half's 65504) inside;
    # z = conv / 2 (exact in half) at z_alpha -2 cancels it exactly, leaving relu(bias). Rounded to half first,
    # the convolution's result would be infinite, and so would the output.
    x, w, y = (clone(a) for a in arrs)
    x[...], w[...] = 32, 32
    conv = T.conv_forward(x, w, problem.params, alpha=4.0)
    assert conv.max() > 65504
    z_half = T.to_layout(conv / 2, "NCHW", np.float16)
    assert np.array_equal(T.as_float64(z_half) * 2, conv)
    outcome = driver.run(FWD, x, w, y, problem.params, alpha=4.0, fused=(z_half, bias, -2.0))
    assert outcome.status == 0, outcome
    assert np.array_equal(T.as_float64(y), np.broadcast_to(np.maximum(T.as_float64(bias), 0.0), y.shape))

    for virtual, rounded in ((G.HALF, False), (G.DOUBLE, True)):
        same = driver.run(FWD, *arrs, problem.params, fused=(z, bias, 0.5), virtual_dtype=virtual, execute=False)
        assert same.status == 0 and (G.NOTE_DOWN_CONVERT in same.notes) == rounded, (virtual, same)


def test_fused_graph_with_z_as_the_output(driver: G.Driver) -> None:
    """In-place residual (z and y the same memory): each element reads z before it is overwritten."""
    problem = CASES["3d"]
    arrs, z, bias = fused_inputs(problem, np.float32, "NCHW")
    expected = fused_reference(arrs, z, bias, problem.params, 1.0)
    x, w, _ = arrs
    y = clone(z)
    outcome = driver.run(FWD, x, w, y, problem.params, alpha=ALPHA, fused=(y, bias, 1.0))
    assert outcome.status == 0
    T.assert_close(y, expected, np.float32)
