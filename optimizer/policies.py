"""Batch-size policies: which micro-batch sizes a mini-batch may be split into."""

from __future__ import annotations

import enum


class BatchSizePolicy(enum.Enum):
    """Candidate micro-batch sizes S for a mini-batch of B samples.

    ``undivided``: {B} (plain cuDNN under the same limit); ``powerOfTwo``: {1, 2, 4, ..., 2^floor(log2 B)} and B;
    ``all``: {1, ..., B}.
    """

    UNDIVIDED = "undivided"
    POWER_OF_TWO = "powerOfTwo"
    ALL = "all"


_ALIASES: dict[str, BatchSizePolicy] = {
    "undivided": BatchSizePolicy.UNDIVIDED,
    "none": BatchSizePolicy.UNDIVIDED,
    "poweroftwo": BatchSizePolicy.POWER_OF_TWO,
    "power_of_two": BatchSizePolicy.POWER_OF_TWO,
    "power-of-two": BatchSizePolicy.POWER_OF_TWO,
    "pow2": BatchSizePolicy.POWER_OF_TWO,
    "all": BatchSizePolicy.ALL,
}


def parse_policy(name: str | BatchSizePolicy) -> BatchSizePolicy:
    """The policy called ``name`` (case-insensitive; ``power_of_two`` and ``pow2`` alias ``powerOfTwo``)."""
    if isinstance(name, BatchSizePolicy):
        return name
    if not isinstance(name, str):
        raise TypeError(f"batch-size policy must be a str or BatchSizePolicy, not {type(name).__name__}")
    found = _ALIASES.get(name.strip().lower())
    if found is None:
        accepted = ", ".join(p.value for p in BatchSizePolicy)
        raise ValueError(f"unknown batch-size policy {name!r}: expected one of {accepted} (also power_of_two, pow2)")
    return found


def candidate_batch_sizes(batch: int, policy: BatchSizePolicy | str) -> tuple[int, ...]:
    """The micro-batch sizes ``policy`` allows for a mini-batch of ``batch`` samples, ascending."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, not {batch!r}")
    pol = parse_policy(policy)
    if pol is BatchSizePolicy.UNDIVIDED:
        return (batch,)
    if pol is BatchSizePolicy.ALL:
        return tuple(range(1, batch + 1))
    powers = [1 << k for k in range(batch.bit_length())]
    if powers[-1] != batch:
        powers.append(batch)
    return tuple(powers)


def can_compose(batch: int, sizes: tuple[int, ...] | list[int] | set[int] | frozenset[int]) -> bool:
    """Whether ``batch`` is a sum of elements of ``sizes`` (each usable any number of times)."""
    reachable = 1  # bit n set: n is a sum of sizes
    usable = sorted({s for s in sizes if 1 <= s <= batch})
    if 1 in usable:
        return True
    mask = (1 << (batch + 1)) - 1
    # Doubling shifts add 1, 2, 4, ... more copies of s, so ceil(log2(batch / s)) shifts cover every count.
    for s in usable:
        shift = s
        while shift <= batch:
            reachable = (reachable | (reachable << shift)) & mask
            shift *= 2
    return bool(reachable >> batch & 1)
