"""Frozen value types that go into and come out of the optimizer.

Units are in the names: times in milliseconds, workspaces in bytes. Every type is immutable and hashable so
plans can be cached and compared.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True)
class _AlgoRun:
    """An algorithm ``algo`` (with ``math_type``) run on ``batch`` samples: ``time_ms`` and ``workspace_bytes``."""

    batch: int
    algo: int
    time_ms: float
    workspace_bytes: int
    deterministic: bool = True
    math_type: int = 0


@dataclass(frozen=True)
class AlgoPerf(_AlgoRun):
    """One measured algorithm: running it on a micro-batch of ``batch`` samples takes ``time_ms`` and needs
    ``workspace_bytes`` of scratch memory. ``time_ms`` may be ``inf`` for an algorithm that cannot run."""


@dataclass(frozen=True)
class MicroBatch(_AlgoRun):
    """One step of a plan: ``batch`` consecutive samples run with algorithm ``algo`` (and ``math_type``)."""

    @classmethod
    def from_perf(cls, perf: AlgoPerf) -> MicroBatch:
        return cls(perf.batch, perf.algo, perf.time_ms, perf.workspace_bytes, perf.deterministic, perf.math_type)


def _canonical_key(mb: MicroBatch) -> tuple[int, int, int, float, int, bool]:
    return (-mb.batch, mb.algo, mb.math_type, mb.time_ms, mb.workspace_bytes, not mb.deterministic)


@dataclass(frozen=True)
class Plan:
    """Micro-batches run one after another in one workspace.

    The micro-batches are stored in canonical order (descending batch, then algo, then math type) whatever order
    they were given in, so equal plans compare and hash equal.
    """

    micro_batches: tuple[MicroBatch, ...]

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.micro_batches, key=_canonical_key))
        if ordered != self.micro_batches:
            object.__setattr__(self, "micro_batches", ordered)

    @property
    def batch(self) -> int:
        return sum(mb.batch for mb in self.micro_batches)

    @property
    def time_ms(self) -> float:
        return sum((mb.time_ms for mb in self.micro_batches), 0.0)

    @property
    def workspace_bytes(self) -> int:
        """The largest micro-batch workspace: the micro-batches share one buffer."""
        return max((mb.workspace_bytes for mb in self.micro_batches), default=0)

    @property
    def deterministic(self) -> bool:
        return all(mb.deterministic for mb in self.micro_batches)


class Status(enum.Enum):
    OPTIMAL = "optimal"
    # A valid answer without a proof of optimality (the greedy heuristic).
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    # The solver stopped at its time limit; a plan is attached when it had found one.
    TIME_LIMIT = "time_limit"
    ERROR = "error"


@dataclass(frozen=True)
class PlanResult:
    """Outcome of planning one kernel: ``plan`` is None unless ``status`` is OPTIMAL. ``verified``: the plan
    already won a check on real executions (set by the planner from its cache, never by the optimizer).
    ``rival``: for a plan of one call not yet checked, the single call at N it is to be checked against (the
    runner-up Find timed close to it; set by the planner, never by the optimizer), else None."""

    status: Status
    plan: Plan | None
    message: str
    verified: bool = False
    rival: MicroBatch | None = None


@dataclass(frozen=True)
class KernelOptions:
    """The plans one kernel may choose from in Workspace Division (typically its Pareto front)."""

    name: str
    plans: tuple[Plan, ...]


@dataclass(frozen=True)
class DivisionResult:
    """Outcome of Workspace Division.

    ``plans[i]`` is the choice for input kernel ``i`` (None for all kernels when no solution was found, in which
    case the totals are 0). ``solve_time_s`` is the wall time of the whole call.
    """

    status: Status
    message: str
    plans: tuple[Plan | None, ...]
    total_time_ms: float
    total_workspace_bytes: int
    solve_time_s: float
