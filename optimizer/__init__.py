"""The μ-cuDNN optimizer: batch-size policies, Workspace Reuse (DP), Pareto fronts and Workspace Division (ILP).

Pure computation on frozen dataclasses (times in ms, workspaces in bytes): no I/O, no logging.
"""

from __future__ import annotations

from .division import divide_workspace, divide_workspace_greedy
from .pareto import pareto_front
from .policies import BatchSizePolicy, can_compose, candidate_batch_sizes, parse_policy
from .reuse import best_plan, keeps_quantum
from .types import AlgoPerf, DivisionResult, KernelOptions, MicroBatch, Plan, PlanResult, Status

__all__ = [
    "AlgoPerf",
    "BatchSizePolicy",
    "DivisionResult",
    "KernelOptions",
    "MicroBatch",
    "Plan",
    "PlanResult",
    "Status",
    "best_plan",
    "can_compose",
    "candidate_batch_sizes",
    "divide_workspace",
    "divide_workspace_greedy",
    "keeps_quantum",
    "pareto_front",
    "parse_policy",
]
