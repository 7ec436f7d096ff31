"""What the host backend's API tests share: the convolution problems every algorithm is run on, the ConvSpec of
a reference problem, a call's status, and one op run through the binding next to the NumPy reference."""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from ucudnn import cudnn as C
from ucudnn import testing as T

CASES = {
    "2d-groups-3x3": T.ConvProblem((2, 4, 7, 6), (6, 2, 3, 3), T.ConvParams.make(2, pad=1, groups=2)),
    "2d-strided-dilated-convmode": T.ConvProblem(
        (2, 3, 9, 8),
        (4, 3, 3, 2),
        T.ConvParams.make(2, pad=(1, 0), stride=(2, 1), dilation=(1, 2), cross_correlation=False),
    ),
    "3d": T.ConvProblem((1, 2, 4, 5, 5), (3, 2, 3, 3, 3), T.ConvParams.make(3, pad=1, stride=(1, 2, 1))),
}


def spec_of(params: T.ConvParams, compute: C.DataType | None = None, **kw: Any) -> C.ConvSpec:
    mode = C.ConvMode.CROSS_CORRELATION if params.cross_correlation else C.ConvMode.CONVOLUTION
    return C.ConvSpec(params.pad, params.stride, params.dilation, params.groups, mode, compute_type=compute, **kw)


def status_of(fn: Any, *args: Any, **kwargs: Any) -> int:
    try:
        fn(*args, **kwargs)
    except C.CudnnError as e:
        return e.status
    return 0


def run_with_reference(
    cudnn: C.Cudnn,
    handle: C.Handle,
    op: C.Op,
    prob: T.ConvProblem,
    spec: C.ConvSpec,
    algo: int,
    x: npt.NDArray[Any],
    w: npt.NDArray[Any],
    y: npt.NDArray[Any],
    ws: npt.NDArray[Any],
    alpha: float,
    beta: float,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """(what the binding computed, what the reference expects) for ``op``; x, w, y are the forward problem's
    arrays, the op's output among them is the prior output beta blends in (and is overwritten)."""
    if op == C.Op.FWD:
        expected = T.conv_forward(x, w, prob.params, alpha=alpha, beta=beta, y=y)
        return cudnn.forward(handle, x, w, spec, algo, ws, alpha, beta, y), expected
    if op == C.Op.BWD_DATA:
        expected = T.conv_backward_data(w, y, prob.params, prob.x_shape, alpha=alpha, beta=beta, dx=x)
        return cudnn.backward_data(handle, w, y, spec, algo, x, ws, alpha, beta), expected
    expected = T.conv_backward_filter(x, y, prob.params, prob.w_shape, alpha=alpha, beta=beta, dw=w)
    return cudnn.backward_filter(handle, x, y, spec, algo, w, ws, alpha, beta), expected
