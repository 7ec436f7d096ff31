"""How many back-to-back calls a GPU timing sample gets (bench.runner.adaptive_calls), and in which order the two
sides of a comparison are sampled."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from ucudnn.bench.backends import Sample
from ucudnn.bench.runner import Row, RunConfig, Runner, adaptive_calls


@pytest.mark.parametrize(
    ("kernel_ms", "calls"),
    [(0.01, 10), (0.2, 10), (0.25, 8), (0.7, 3), (1.0, 2), (5.0, 2), (100.0, 2), (0.0, 10), (math.nan, 10)],
)
def test_calls_fill_the_sample_between_two_and_the_most(kernel_ms: float, calls: int) -> None:
    assert adaptive_calls(kernel_ms, 2.0, 10) == calls


def test_never_more_than_asked() -> None:
    assert adaptive_calls(5.0, 2.0, 1) == 1 and adaptive_calls(0.01, 2.0, 3) == 3


class _Recorder:
    """A backend that records what the runner does: fills of the output and calls of each side."""

    name = "host"

    def __init__(self) -> None:
        self.log: list[str] = []

    def fill(self, array: object, value: float) -> None:
        self.log.append("fill")

    def sample(self, fn: Callable[[], None], calls: int) -> Sample:
        fn()
        return Sample(1.0, 1.0)

    def issue(self, fn: Callable[[], None], calls: int) -> None:
        for _ in range(calls):
            fn()


@pytest.mark.parametrize("repeat", [3, 4])
def test_both_sides_of_a_pair_are_sampled_alike_in_alternating_order(repeat: int) -> None:
    """Was: always the baseline first, then a NaN fill, then ucudnn -- the second of two samples of the very same
    call measured ~0.25% slower on the host backend, so identical calls read as ucudnn being slower."""
    runner = Runner.__new__(Runner)
    backend = _Recorder()
    runner.b = backend  # type: ignore[assignment]
    runner.cfg = RunConfig(ops=["fwd"], limits=[1], policies=["powerOfTwo"], repeat=repeat)
    runner.calls = 1
    row = Row(problem="p", origin="o", shape="s", w=1, h=1, c=1, n=1, k=1, filter_w=1, filter_h=1, pad_w=0, pad_h=0,
              stride_w=1, stride_h=1, op="fwd", limit_bytes=1, policy="powerOfTwo")  # fmt: skip
    runner._time_pair(SimpleNamespace(out=None), lambda: backend.log.append("cudnn"),  # type: ignore[arg-type]
                      lambda: backend.log.append("ucudnn"), row)  # fmt: skip
    samples = [x for x in backend.log if x != "fill"]
    assert all(backend.log[i - 1] == "fill" for i, x in enumerate(backend.log) if x != "fill")  # each from NaN
    pairs = [samples[2 * i : 2 * i + 2] for i in range(repeat)]
    assert pairs == [["cudnn", "ucudnn"] if i % 2 == 0 else ["ucudnn", "cudnn"] for i in range(repeat)]
    assert samples[-1] == "ucudnn"  # the output compared afterwards is ucudnn's
    assert len(row.ucudnn_times_ms) == len(row.undivided_times_ms) == repeat
