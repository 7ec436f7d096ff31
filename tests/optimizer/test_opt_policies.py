"""Batch-size policies and their parsing."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ucudnn.optimizer import BatchSizePolicy, can_compose, candidate_batch_sizes, parse_policy


@pytest.mark.parametrize(
    ("batch", "policy", "expected"),
    [
        (1, "undivided", (1,)),
        (1, "powerOfTwo", (1,)),
        (1, "all", (1,)),
        (256, "undivided", (256,)),
        (256, "powerOfTwo", (1, 2, 4, 8, 16, 32, 64, 128, 256)),
        (100, "powerOfTwo", (1, 2, 4, 8, 16, 32, 64, 100)),
        (13, "powerOfTwo", (1, 2, 4, 8, 13)),
        (5, "all", (1, 2, 3, 4, 5)),
    ],
)
def test_candidate_sizes(batch: int, policy: str, expected: tuple[int, ...]) -> None:
    assert candidate_batch_sizes(batch, policy) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("undivided", BatchSizePolicy.UNDIVIDED),
        ("UNDIVIDED", BatchSizePolicy.UNDIVIDED),
        ("powerOfTwo", BatchSizePolicy.POWER_OF_TWO),
        ("poweroftwo", BatchSizePolicy.POWER_OF_TWO),
        ("power_of_two", BatchSizePolicy.POWER_OF_TWO),
        ("pow2", BatchSizePolicy.POWER_OF_TWO),
        (" All ", BatchSizePolicy.ALL),
    ],
)
def test_parse_policy(name: str, expected: BatchSizePolicy) -> None:
    assert parse_policy(name) is expected
    assert parse_policy(expected) is expected


def test_bad_policy_lists_the_accepted_names() -> None:
    with pytest.raises(ValueError, match="undivided, powerOfTwo, all"):
        parse_policy("some")


def test_bad_batch_is_rejected() -> None:
    for bad in (0, -3, True):
        with pytest.raises(ValueError, match="batch"):
            candidate_batch_sizes(bad, "all")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.sets(st.integers(1, 45), max_size=4))
def test_can_compose_matches_enumeration(batch: int, sizes: set[int]) -> None:
    small = sorted(s for s in sizes if s <= batch)
    expected = any(
        sum(combo) == batch
        for r in range(1, batch + 1)
        for combo in itertools.combinations_with_replacement(small, r)
        if len(small) > 0 and r <= batch // min(small)
    )
    assert can_compose(batch, sizes) is expected
