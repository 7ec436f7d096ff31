"""How many back-to-back calls a GPU timing sample gets (bench.runner.adaptive_calls)."""

from __future__ import annotations

import math

import pytest

from ucudnn.bench.runner import adaptive_calls


@pytest.mark.parametrize(
    ("kernel_ms", "calls"),
    [(0.01, 10), (0.2, 10), (0.25, 8), (0.7, 3), (1.0, 2), (5.0, 2), (100.0, 2), (0.0, 10), (math.nan, 10)],
)
def test_calls_fill_the_sample_between_two_and_the_most(kernel_ms: float, calls: int) -> None:
    assert adaptive_calls(kernel_ms, 2.0, 10) == calls


def test_never_more_than_asked() -> None:
    assert adaptive_calls(5.0, 2.0, 1) == 1 and adaptive_calls(0.01, 2.0, 3) == 3
