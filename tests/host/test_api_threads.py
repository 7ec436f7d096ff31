"""Host backend API: concurrent use from 4 threads sharing 2 handles gives the single-threaded results."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ucudnn import cudnn as C
from ucudnn import testing as T


def test_four_threads_two_handles(cudnn: C.Cudnn) -> None:
    handles = [cudnn.handle(), cudnn.handle()]
    rng = np.random.default_rng(11)
    jobs: list[dict[str, Any]] = []
    for i in range(4):
        n, c, k = 2 + i, 3 + i % 2, 4 + i
        x = rng.standard_normal((n, c, 9, 8))
        w = rng.standard_normal((k, c, 3, 3))
        params = T.ConvParams.make(2, pad=1, stride=1 + i % 2)
        spec = C.ConvSpec(params.pad, params.stride)
        y_shape = T.output_shape(x.shape, w.shape, params)
        dy = rng.standard_normal(y_shape)
        jobs.append(
            dict(
                x=x,
                w=w,
                dy=dy,
                spec=spec,
                handle=handles[i % 2],
                y_ref=T.conv_forward(x, w, params),
                dx_ref=T.conv_backward_data(w, dy, params, x.shape),
                dw_ref=T.conv_backward_filter(x, dy, params, w.shape),
            )
        )
    errors: list[BaseException] = []

    def work(job: dict[str, Any]) -> None:
        try:
            h, x, w, dy, spec = job["handle"], job["x"], job["w"], job["dy"], job["spec"]
            for _ in range(3):
                for op in C.Op:
                    rows = cudnn.find(h, op, x, w, np.zeros(dy.shape), spec)
                    for r in (r for r in rows if r.status == 0):
                        if op == C.Op.FWD:
                            out = cudnn.forward(h, x, w, spec, r.algo)
                            T.assert_close(out, job["y_ref"], np.float64, f"fwd {r.algo}")
                        elif op == C.Op.BWD_DATA:
                            out = cudnn.backward_data(h, w, dy, spec, r.algo, np.zeros(x.shape))
                            T.assert_close(out, job["dx_ref"], np.float64, f"bwd-data {r.algo}")
                        else:
                            out = cudnn.backward_filter(h, x, dy, spec, r.algo, np.zeros(w.shape))
                            T.assert_close(out, job["dw_ref"], np.float64, f"bwd-filter {r.algo}")
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for h in handles:
        h.close()
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
