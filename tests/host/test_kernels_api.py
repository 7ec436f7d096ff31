"""The kernels through the whole cuDNN API of the built host backend (descriptors, checks, dispatch), against the
NumPy reference: every implemented algorithm of every op. Tolerances as in ucudnn.testing.tolerance (float32
1e-4, float64 1e-10, relative, atol scaled by the result's magnitude). Kernel corner cases (strides, canaries,
random shapes) are in test_kernels.py; this checks the path from cuDNN calls to the kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ucudnn import cudnn as C
from ucudnn import testing as T

from ._api_cases import CASES, run_with_reference, spec_of


@pytest.mark.parametrize("op", list(C.Op), ids=lambda o: o.name)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_every_algorithm(cudnn: C.Cudnn, handle: C.Handle, op: C.Op, case: str, dtype: type, layout: T.Layout) -> None:
    prob = CASES[case]
    spec = spec_of(prob.params)
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal(prob.x_shape)
    w0 = rng.standard_normal(prob.w_shape)
    y0 = rng.standard_normal(prob.y_shape)
    alpha, beta = 1.5, 0.25
    ran = 0
    for algo in range(C.ALGO_COUNT[op]):
        x: npt.NDArray[Any] = T.to_layout(x0, layout, dtype)
        w: npt.NDArray[Any] = T.to_layout(w0, layout, dtype)
        y: npt.NDArray[Any] = T.to_layout(y0, layout, dtype)
        try:
            size = cudnn.workspace_size(handle, op, x, w, y, spec, algo)
        except C.CudnnError:
            continue
        ws = np.empty(size, np.uint8)
        got, expected = run_with_reference(cudnn, handle, op, prob, spec, algo, x, w, y, ws, alpha, beta)
        T.assert_close(got, expected, dtype, f"{op.name} algo {algo}")
        ran += 1
    assert ran >= 3 if case == "2d-groups-3x3" else ran >= 2
