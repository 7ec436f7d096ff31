"""NumPy reference convolutions and test helpers.

The reference computes cuDNN's three convolution operations in float64, whatever the input dtype, with
groups, dilation, strides, padding, both convolution modes, 2-D or 3-D spatial dims and alpha/beta scaling.

Arrays are always indexed in logical NCHW order -- ``(N, C, H, W)`` or ``(N, C, D, H, W)`` for tensors,
``(K, C / groups, R, S)`` or ``(K, C / groups, T, R, S)`` for filters -- and may have any strides: an NHWC or
non-packed tensor is a NumPy view with the corresponding strides (see :func:`to_layout`), which is also how
the strides reach a C library (:func:`element_strides`). Results are new float64 arrays owned by the caller.

Inputs may be float16 (HALF) or bfloat16, which NumPy lacks and :mod:`ucudnn.cudnn` stores as bit patterns in
uint16 arrays (:data:`BFLOAT16`): the reference reads uint16 arrays as bfloat16 (:func:`as_float64`), and
:func:`to_layout` with ``dtype=BFLOAT16`` rounds to bfloat16.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ucudnn.cudnn import bf16_from_float, bf16_to_float

FloatArray = npt.NDArray[np.floating[Any]]
Layout = Literal["NCHW", "NHWC", "padded", "NHWC-padded", "CNHW"]
LAYOUTS: tuple[Layout, ...] = ("NCHW", "NHWC", "padded", "NHWC-padded", "CNHW")
BFLOAT16: np.dtype[np.uint16] = np.dtype(np.uint16)
"""The NumPy dtype that holds bfloat16 data (bit patterns), as in :mod:`ucudnn.cudnn`."""


def as_float64(a: npt.ArrayLike) -> FloatArray:
    """``a`` as float64 values; a uint16 array is bfloat16 bit patterns and is decoded (exactly)."""
    arr = np.asarray(a)
    if arr.dtype == BFLOAT16:
        return bf16_to_float(arr).astype(np.float64)
    out: FloatArray = arr.astype(np.float64)
    return out


def _spatial(value: int | Sequence[int], nb_spatial: int, name: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * nb_spatial
    out = tuple(int(v) for v in value)
    if len(out) != nb_spatial:
        raise ValueError(f"{name} has {len(out)} entries, expected {nb_spatial} (one per spatial dim)")
    return out


@dataclass(frozen=True)
class ConvParams:
    """A convolution descriptor: per-spatial-dim padding, stride and dilation, group count and mode.

    ``cross_correlation=False`` is cuDNN's CONVOLUTION mode (filter flipped along every spatial dim).
    """

    pad: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    cross_correlation: bool = True

    @classmethod
    def make(
        cls,
        nb_spatial: int,
        *,
        pad: int | Sequence[int] = 0,
        stride: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        cross_correlation: bool = True,
    ) -> ConvParams:
        """Parameters with scalars broadcast to ``nb_spatial`` dims."""
        params = cls(
            _spatial(pad, nb_spatial, "pad"),
            _spatial(stride, nb_spatial, "stride"),
            _spatial(dilation, nb_spatial, "dilation"),
            groups,
            cross_correlation,
        )
        if min(params.pad) < 0 or min(params.stride) < 1 or min(params.dilation) < 1 or groups < 1:
            raise ValueError(f"invalid convolution parameters {params}: need pad >= 0, stride, dilation, groups >= 1")
        return params

    @property
    def nb_spatial(self) -> int:
        return len(self.pad)


def output_dim(size: int, filter_size: int, pad: int, stride: int, dilation: int) -> int:
    """cuDNN's output extent along one spatial dim: 1 + (in + 2 pad - ((f - 1) dilation + 1)) // stride."""
    return 1 + (size + 2 * pad - ((filter_size - 1) * dilation + 1)) // stride


def output_shape(x_shape: Sequence[int], w_shape: Sequence[int], params: ConvParams) -> tuple[int, ...]:
    """The logical NCHW shape of the forward output for input ``x_shape`` and filter ``w_shape``."""
    nsp = len(x_shape) - 2
    if nsp != params.nb_spatial or len(w_shape) != len(x_shape):
        raise ValueError(f"shapes {tuple(x_shape)}, {tuple(w_shape)} do not match {params.nb_spatial} spatial dims")
    if x_shape[1] != w_shape[1] * params.groups or w_shape[0] % params.groups:
        raise ValueError(f"channels: x has {x_shape[1]}, filter {tuple(w_shape)} with {params.groups} groups")
    dims = tuple(
        output_dim(x_shape[2 + d], w_shape[2 + d], params.pad[d], params.stride[d], params.dilation[d])
        for d in range(nsp)
    )
    if min(dims) < 1:
        raise ValueError(f"empty output {dims} for input {tuple(x_shape)}, filter {tuple(w_shape)}, {params}")
    return (int(x_shape[0]), int(w_shape[0]), *dims)


def _taps(params: ConvParams, f_shape: Sequence[int], out: Sequence[int]) -> Iterator[tuple[tuple[int, ...], Any]]:
    """For every filter tap: the tap index and the strided slice of the padded input it multiplies."""
    for tap in itertools.product(*(range(f) for f in f_shape)):
        window = tuple(
            slice(t * d, t * d + s * (o - 1) + 1, s)
            for t, d, s, o in zip(tap, params.dilation, params.stride, out, strict=True)
        )
        yield tap, window


def _oriented(w: npt.ArrayLike, params: ConvParams) -> FloatArray:
    """The filter as float64, flipped for CONVOLUTION mode so every op can be written as a correlation."""
    w64 = as_float64(w)
    if not params.cross_correlation:
        w64 = w64[(slice(None), slice(None)) + (slice(None, None, -1),) * params.nb_spatial]
    return w64


def _blend(result: FloatArray, alpha: float, beta: float, prior: npt.ArrayLike | None) -> FloatArray:
    out = alpha * result
    if beta != 0.0:
        if prior is None:
            raise ValueError("beta != 0 needs the prior output")
        out = out + beta * as_float64(prior)
    return out


def conv_forward(
    x: npt.ArrayLike,
    w: npt.ArrayLike,
    params: ConvParams,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    y: npt.ArrayLike | None = None,
) -> FloatArray:
    """``alpha * conv(x, w) + beta * y`` in float64 (``y`` is read only when beta != 0)."""
    xa = as_float64(x)
    wa = _oriented(w, params)
    yshape = output_shape(xa.shape, wa.shape, params)
    n, c = xa.shape[:2]
    g = params.groups
    k = wa.shape[0]
    out = yshape[2:]
    xp = np.pad(xa, [(0, 0), (0, 0), *((p, p) for p in params.pad)])
    xg = xp.reshape(n, g, c // g, *xp.shape[2:])
    wg = wa.reshape(g, k // g, c // g, *wa.shape[2:])
    acc = np.zeros((n, g, k // g, *out))
    lead = (slice(None),) * 3
    for tap, window in _taps(params, wa.shape[2:], out):
        acc += np.einsum("ngc...,gkc->ngk...", xg[lead + window], wg[lead + tap])
    return _blend(acc.reshape(yshape), alpha, beta, y)


def conv_backward_data(
    w: npt.ArrayLike,
    dy: npt.ArrayLike,
    params: ConvParams,
    x_shape: Sequence[int],
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    dx: npt.ArrayLike | None = None,
) -> FloatArray:
    """``alpha * conv^T(dy, w) + beta * dx``: the gradient of the forward output w.r.t. an input of ``x_shape``."""
    wa = _oriented(w, params)
    dya = as_float64(dy)
    yshape = output_shape(x_shape, wa.shape, params)
    if dya.shape != yshape:
        raise ValueError(f"dy has shape {dya.shape}, expected {yshape}")
    n, c = int(x_shape[0]), int(x_shape[1])
    g = params.groups
    k = wa.shape[0]
    padded = [int(s) + 2 * p for s, p in zip(x_shape[2:], params.pad, strict=True)]
    acc = np.zeros((n, g, c // g, *padded))
    dyg = dya.reshape(n, g, k // g, *yshape[2:])
    wg = wa.reshape(g, k // g, c // g, *wa.shape[2:])
    lead = (slice(None),) * 3
    for tap, window in _taps(params, wa.shape[2:], yshape[2:]):
        acc[lead + window] += np.einsum("ngk...,gkc->ngc...", dyg, wg[lead + tap])
    crop = tuple(slice(p, p + int(s)) for p, s in zip(params.pad, x_shape[2:], strict=True))
    return _blend(acc[lead + crop].reshape(tuple(int(s) for s in x_shape)), alpha, beta, dx)


def conv_backward_filter(
    x: npt.ArrayLike,
    dy: npt.ArrayLike,
    params: ConvParams,
    w_shape: Sequence[int],
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    dw: npt.ArrayLike | None = None,
) -> FloatArray:
    """``alpha * dL/dw + beta * dw`` for a filter of ``w_shape``, summed over the batch."""
    xa = as_float64(x)
    dya = as_float64(dy)
    yshape = output_shape(xa.shape, w_shape, params)
    if dya.shape != yshape:
        raise ValueError(f"dy has shape {dya.shape}, expected {yshape}")
    n, c = xa.shape[:2]
    g = params.groups
    k = int(w_shape[0])
    f_shape = tuple(int(f) for f in w_shape[2:])
    xp = np.pad(xa, [(0, 0), (0, 0), *((p, p) for p in params.pad)])
    xg = xp.reshape(n, g, c // g, *xp.shape[2:])
    dyg = dya.reshape(n, g, k // g, *yshape[2:])
    acc = np.zeros((g, k // g, c // g, *f_shape))
    lead = (slice(None),) * 3
    for tap, window in _taps(params, f_shape, yshape[2:]):
        xs = xg[lead + window].reshape(n, g, c // g, -1)
        acc[lead + tap] = np.einsum("ngcp,ngkp->gkc", xs, dyg.reshape(n, g, k // g, -1))
    grad = acc.reshape(k, c // g, *f_shape)
    if not params.cross_correlation:
        grad = grad[(slice(None), slice(None)) + (slice(None, None, -1),) * params.nb_spatial]
    return _blend(grad, alpha, beta, dw)


def to_layout(a: npt.ArrayLike, layout: Layout, dtype: npt.DTypeLike | None = None) -> FloatArray:
    """A copy of ``a`` (logical NCHW order, kept) whose memory follows ``layout``.

    ``NCHW``: packed; ``NHWC``: channels last, packed; ``padded``: NCHW order with a gap after every dim
    (non-packed strides); ``NHWC-padded``: channels last with gaps; ``CNHW``: packed with N and C swapped in
    memory (batch samples interleaved). Works for filters too (K plays N). ``dtype=BFLOAT16`` (uint16) rounds
    the values to bfloat16 bit patterns.
    """
    src = np.asarray(a)
    if dtype is not None:
        src = bf16_from_float(src) if np.dtype(dtype) == BFLOAT16 else src.astype(dtype)
    nd = src.ndim
    order = list(range(nd))
    if layout in ("NHWC", "NHWC-padded"):
        order = [0, *range(2, nd), 1]
    elif layout == "CNHW":
        order = [1, 0, *range(2, nd)]
    mem_shape = [src.shape[i] for i in order]
    if layout in ("padded", "NHWC-padded"):
        gap = 0x7FC0 if src.dtype == BFLOAT16 else np.nan  # the gaps hold NaN (a bfloat16 quiet NaN pattern)
        big = np.full([s + 1 + (i % 2) for i, s in enumerate(mem_shape)], gap, dtype=src.dtype)
        mem = big[tuple(slice(0, s) for s in mem_shape)]
    else:
        mem = np.empty(mem_shape, dtype=src.dtype)
    mem[...] = src.transpose(order)
    out: FloatArray = mem.transpose(np.argsort(order))
    return out


def element_strides(a: npt.NDArray[Any]) -> tuple[int, ...]:
    """The strides of ``a`` in elements (cuDNN's unit), from NumPy's byte strides."""
    if any(s % a.itemsize for s in a.strides):
        raise ValueError(f"strides {a.strides} are not whole elements of {a.itemsize} bytes")
    return tuple(s // a.itemsize for s in a.strides)


@dataclass(frozen=True)
class ConvProblem:
    """Logical shapes of one convolution: input ``x_shape`` and filter ``w_shape`` (NCHW order)."""

    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    params: ConvParams

    @property
    def y_shape(self) -> tuple[int, ...]:
        return output_shape(self.x_shape, self.w_shape, self.params)


def random_problem(
    rng: np.random.Generator,
    *,
    nb_spatial: int = 2,
    max_batch: int = 3,
    max_channels: int = 4,
    max_groups: int = 2,
    max_filter: int = 3,
    max_extra: int = 5,
    max_stride: int = 2,
    max_dilation: int = 2,
) -> ConvProblem:
    """A small random valid problem: channels per group, filter, padding, stride, dilation and input extents.

    Padding stays below the dilated filter extent (as cuDNN requires for the backward ops to be meaningful)
    and the input is at least as large as needed for a non-empty output, plus up to ``max_extra``.
    """
    groups = int(rng.integers(1, max_groups + 1))
    cg = int(rng.integers(1, max_channels + 1))
    kg = int(rng.integers(1, max_channels + 1))
    f, pad, stride, dil, size = [], [], [], [], []
    for _ in range(nb_spatial):
        fd = int(rng.integers(1, max_filter + 1))
        dd = int(rng.integers(1, max_dilation + 1)) if fd > 1 else 1
        eff = (fd - 1) * dd + 1
        pd = int(rng.integers(0, eff))
        sd = int(rng.integers(1, max_stride + 1))
        f.append(fd)
        dil.append(dd)
        pad.append(pd)
        stride.append(sd)
        size.append(max(1, eff - 2 * pd) + int(rng.integers(0, max_extra + 1)))
    params = ConvParams.make(
        nb_spatial,
        pad=pad,
        stride=stride,
        dilation=dil,
        groups=groups,
        cross_correlation=bool(rng.integers(0, 2)),
    )
    n = int(rng.integers(1, max_batch + 1))
    return ConvProblem((n, groups * cg, *size), (groups * kg, cg, *f), params)


def tolerance(dtype: npt.DTypeLike) -> tuple[float, float]:
    """(rtol, atol-relative-to-magnitude) for comparing a backend result of ``dtype`` with the reference.

    float32: 1e-4 (a few thousand float32 terms summed in any order stay well inside it);
    float64: 1e-10.
    16-bit data is computed in float and the result rounded to 16 bits: one rounding is at most half a unit in
    the last place, 2**-11 (4.9e-4) relative for float16 and 2**-8 (3.9e-3) for bfloat16. The atomics-based
    ALGO_0s round the running sum on every add (up to 9 times: 8 parts + the beta scaling), each time by at most
    that much of the running magnitude. Hence float16: rtol 1e-3 (two roundings), atol 5e-3 x magnitude
    (10 roundings); bfloat16 (uint16): rtol 8e-3, atol 2e-2 x magnitude, the same counts.
    """
    dt = np.dtype(dtype)
    if dt == np.float16:
        return (1e-3, 5e-3)
    if dt == BFLOAT16:
        return (8e-3, 2e-2)
    return (1e-4, 1e-4) if dt == np.float32 else (1e-10, 1e-10)


def assert_close(actual: npt.ArrayLike, expected: npt.ArrayLike, dtype: npt.DTypeLike, what: str = "") -> None:
    """Assert ``actual`` matches ``expected`` within :func:`tolerance`, atol scaled by the expected magnitude."""
    exp = as_float64(expected)
    act = as_float64(actual)
    rtol, atol = tolerance(dtype)
    scale = float(np.max(np.abs(exp))) if exp.size else 0.0
    np.testing.assert_allclose(act, exp, rtol=rtol, atol=atol * max(scale, 1.0), err_msg=what)
