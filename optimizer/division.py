"""Workspace Division: one workspace budget shared by all kernels of a network.

Choosing one plan per kernel to minimise the total time with the plans' workspaces summing to at most the
budget is a multiple-choice knapsack. ``divide_workspace`` solves it exactly with ``scipy.optimize.milp``
(HiGHS); ``divide_workspace_greedy`` is the fast heuristic baseline.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .types import DivisionResult, KernelOptions, Plan, Status

# Workspaces are given to the solver in this unit (MiB) so that byte counts of 1e10 stay well scaled.
_MIB = float(1 << 20)
# No-good cuts tried before falling back to tightening the budget row after rounding overshoots.
_MAX_CUTS = 8


@dataclass(frozen=True)
class _Option:
    index: int  # position in the kernel's ``plans``
    time_ms: float
    workspace_bytes: int


def _validate(kernels: Sequence[KernelOptions], total_workspace_bytes: int) -> None:
    if isinstance(total_workspace_bytes, bool) or not isinstance(total_workspace_bytes, int):
        raise ValueError(f"total_workspace_bytes must be an int, not {total_workspace_bytes!r}")
    if total_workspace_bytes < 0:
        raise ValueError(f"total_workspace_bytes must be >= 0, not {total_workspace_bytes}")
    for k, kernel in enumerate(kernels):
        if not isinstance(kernel, KernelOptions):
            raise TypeError(f"kernels[{k}]: expected KernelOptions, not {type(kernel).__name__}")
        for j, plan in enumerate(kernel.plans):
            if not isinstance(plan, Plan):
                raise TypeError(f"kernels[{k}].plans[{j}]: expected Plan, not {type(plan).__name__}")
            t = plan.time_ms
            if math.isnan(t) or math.isinf(t) or t < 0:
                raise ValueError(f"kernels[{k}].plans[{j}]: time_ms must be finite and >= 0, not {t!r}")


def _options(kernels: Sequence[KernelOptions], budget: int) -> list[list[_Option]] | str:
    """Per kernel, the plans that fit the budget and are not dominated (strictly faster than every plan needing
    no more workspace; on exact ties the earlier plan), by increasing workspace. A string explains
    infeasibility."""
    result: list[list[_Option]] = []
    for k, kernel in enumerate(kernels):
        if not kernel.plans:
            return f"kernel {kernel.name!r} (kernels[{k}]) has no plan: nothing fits its workspace limit"
        cands = sorted(
            (_Option(j, p.time_ms, p.workspace_bytes) for j, p in enumerate(kernel.plans)),
            key=lambda o: (o.workspace_bytes, o.time_ms, o.index),
        )
        kept: list[_Option] = []
        for o in cands:
            if o.workspace_bytes <= budget and (not kept or o.time_ms < kept[-1].time_ms):
                kept.append(o)
        if not kept:
            least = cands[0].workspace_bytes
            return (
                f"kernel {kernel.name!r} (kernels[{k}]) needs at least {least} bytes of workspace, more than the "
                f"total budget of {budget} bytes"
            )
        result.append(kept)
    need = sum(opts[0].workspace_bytes for opts in result)
    if need > budget:
        return (
            f"total budget of {budget} bytes is less than the {need} bytes the kernels' least-workspace plans "
            "need together"
        )
    return result


def _result(
    status: Status,
    message: str,
    kernels: Sequence[KernelOptions],
    choice: list[_Option] | None,
    started: float,
) -> DivisionResult:
    if choice is None:
        return DivisionResult(status, message, tuple(None for _ in kernels), 0.0, 0, time.perf_counter() - started)
    plans = tuple(kernels[k].plans[o.index] for k, o in enumerate(choice))
    total_time = math.fsum(p.time_ms for p in plans)
    total_ws = sum(p.workspace_bytes for p in plans)
    return DivisionResult(status, message, plans, total_time, total_ws, time.perf_counter() - started)


def _summary(label: str, choice: list[_Option], budget: int) -> str:
    t = math.fsum(o.time_ms for o in choice)
    ws = sum(o.workspace_bytes for o in choice)
    return f"{label}: {len(choice)} kernel(s), {t:.6g} ms, {ws} of {budget} bytes of workspace"


def _greedy(opts: list[list[_Option]], budget: int) -> list[int]:
    """Positions chosen by the greedy heuristic (see ``divide_workspace_greedy``)."""
    pos = [0] * len(opts)
    left = budget - sum(o[0].workspace_bytes for o in opts)

    def best_upgrade(k: int) -> tuple[float, int, int] | None:
        cur = opts[k][pos[k]]
        found: tuple[float, int, int] | None = None
        # Options are by increasing workspace and strictly decreasing time, so every later one is an upgrade.
        for j in range(pos[k] + 1, len(opts[k])):
            o = opts[k][j]
            extra = o.workspace_bytes - cur.workspace_bytes
            if extra > left:
                break
            entry = (-(cur.time_ms - o.time_ms) / extra, k, j)
            if found is None or entry < found:
                found = entry
        return found

    # One live entry per kernel; when the budget left shrinks, an entry may have become unaffordable, which is
    # noticed when it is popped and the kernel's best affordable upgrade is recomputed.
    heap = [e for k in range(len(opts)) if (e := best_upgrade(k)) is not None]
    heapq.heapify(heap)
    while heap:
        _, k, j = heapq.heappop(heap)
        extra = opts[k][j].workspace_bytes - opts[k][pos[k]].workspace_bytes
        if extra <= left:
            pos[k] = j
            left -= extra
        e = best_upgrade(k)
        if e is not None:
            heapq.heappush(heap, e)
    return pos


def _multiplier(opts: list[list[_Option]], budget: int) -> float:
    """The knapsack row's multiplier (ms per byte) at the LP relaxation's optimum: the efficiency of the first
    convex-hull upgrade, in order of efficiency, that no longer fits (0 if all fit)."""
    increments: list[tuple[float, int]] = []
    for kernel_opts in opts:
        hull = [kernel_opts[0]]
        for o in kernel_opts[1:]:
            # Lower convex hull of (workspace, time): drop points above the chord.
            while len(hull) >= 2:
                a, b = hull[-2], hull[-1]
                lhs = (b.time_ms - a.time_ms) * (o.workspace_bytes - a.workspace_bytes)
                rhs = (o.time_ms - a.time_ms) * (b.workspace_bytes - a.workspace_bytes)
                if lhs >= rhs:
                    hull.pop()
                else:
                    break
            hull.append(o)
        for a, b in itertools.pairwise(hull):
            dw = b.workspace_bytes - a.workspace_bytes
            increments.append(((a.time_ms - b.time_ms) / dw, dw))
    increments.sort(key=lambda e: -e[0])
    left = budget - sum(o[0].workspace_bytes for o in opts)
    for efficiency, dw in increments:
        if dw > left:
            return efficiency
        left -= dw
    return 0.0


def _reduce(opts: list[list[_Option]], budget: int, upper: float) -> tuple[list[list[_Option]], float]:
    """Drop every option that cannot be in a solution of total time <= ``upper`` (a feasible solution's time).

    For any multiplier lam >= 0, L = sum_k min_c (t_c + lam*w_c) - lam*budget bounds the optimum from below, and
    forcing option j of kernel k raises that bound by its reduced cost (t_j + lam*w_j) - min_c (...). Options
    whose bound exceeds ``upper`` are out. Returns the reduced options and L."""
    lam = _multiplier(opts, budget)
    mins = [min(o.time_ms + lam * o.workspace_bytes for o in kernel_opts) for kernel_opts in opts]
    bound = math.fsum(mins) - lam * budget
    # Slack for float rounding: the bound is exact mathematics, the sums are not.
    slack = 1e-9 * max(1.0, abs(upper))
    reduced = [
        [o for o in kernel_opts if bound + (o.time_ms + lam * o.workspace_bytes - m) <= upper + slack]
        for kernel_opts, m in zip(opts, mins, strict=True)
    ]
    return reduced, bound


def divide_workspace(
    kernels: Sequence[KernelOptions],
    *,
    total_workspace_bytes: int,
    time_limit_s: float | None = None,
) -> DivisionResult:
    """Choose one plan per kernel minimising the total time, the plans' workspaces summing to at most
    ``total_workspace_bytes`` (each kernel gets its own buffer).

    Exact. Plans that cannot fit or are dominated within their kernel are removed; the greedy solution gives an
    upper bound and the Lagrangian (LP) bound removes every plan that cannot beat it, often proving the greedy
    optimal outright. What is left is a binary MILP (one variable per plan, one choice per kernel, one knapsack
    row) solved by ``scipy.optimize.milp`` (HiGHS) with a zero relative gap. Workspaces enter the solver in MiB
    so byte counts of 1e10 stay well scaled; the answer is then checked against the budget in exact bytes, and a
    choice that overshoots by solver tolerance is cut off (a no-good constraint) and the MILP solved again, which
    keeps the result exact. Among solutions of equal total time the result is deterministic (same input, same
    answer) but otherwise unspecified.

    Status: OPTIMAL; INFEASIBLE (the message says which kernel or how many bytes are missing); TIME_LIMIT after
    ``time_limit_s`` seconds (with the best plans found: the solver's or the greedy's); FEASIBLE with the greedy
    plans if the solver failed, or after a byte-exact repair that could not prove optimality (the message says
    how close). Raises ValueError/TypeError for malformed input.

    HiGHS may print a diagnostic line on the process's standard output (a C-level printf, not Python's
    sys.stdout) during harder solves; callers that own stdout should point file descriptor 1 elsewhere around
    the call (``ucudnn plan`` does).
    """
    _import_scipy()  # before the clock starts: solve_time_s measures solving, not a one-off import
    started = time.perf_counter()
    _validate(kernels, total_workspace_bytes)
    if time_limit_s is not None and (isinstance(time_limit_s, bool) or not time_limit_s > 0):
        raise ValueError(f"time_limit_s must be positive or None, not {time_limit_s!r}")
    budget = total_workspace_bytes
    opts = _options(kernels, budget)
    if isinstance(opts, str):
        return _result(Status.INFEASIBLE, opts, kernels, None, started)
    greedy = [kernel_opts[p] for kernel_opts, p in zip(opts, _greedy(opts, budget), strict=True)]
    upper = math.fsum(o.time_ms for o in greedy)
    reduced, bound = _reduce(opts, budget, upper)
    if any(not r for r in reduced):  # pragma: no cover - the greedy's own choices always survive, up to rounding
        reduced = opts
    if upper <= bound + 1e-12 * max(1.0, abs(upper)) or all(len(r) == 1 for r in reduced):
        return _result(
            Status.OPTIMAL,
            _summary("optimal (greedy proven optimal by the LP bound)", greedy, budget),
            kernels,
            greedy,
            started,
        )

    fixed = [k for k, r in enumerate(reduced) if len(r) == 1]
    free = [k for k, r in enumerate(reduced) if len(r) > 1]
    spare = budget - sum(reduced[k][0].workspace_bytes for k in fixed)
    sub = [reduced[k] for k in free]
    sub_choice, status, message = _solve_milp(sub, spare, time_limit_s)
    if sub_choice is None:
        if status is Status.TIME_LIMIT:
            return _result(
                Status.TIME_LIMIT, _summary(f"{message}; greedy solution", greedy, budget), kernels, greedy, started
            )
        # The greedy answer is feasible whatever went wrong in the solver: better than no plans at all.
        return _result(
            Status.FEASIBLE,
            _summary(f"{message}; greedy solution, not proven optimal", greedy, budget),
            kernels,
            greedy,
            started,
        )
    choice = [reduced[k][0] for k in range(len(opts))]
    for k, o in zip(free, sub_choice, strict=True):
        choice[k] = o
    if status is not Status.OPTIMAL and math.fsum(o.time_ms for o in choice) > upper:
        choice = greedy
    label = {Status.OPTIMAL: "optimal", Status.TIME_LIMIT: "time limit reached; best found"}.get(status, "feasible")
    note = f" ({len(free)} of {len(opts)} kernels left to the MILP{message})"
    return _result(status, _summary(label, choice, budget) + note, kernels, choice, started)


def _import_scipy() -> None:
    # Importing scipy.optimize takes ~0.4 s; only the exact solver needs it, so planners and CLIs that never
    # divide a budget do not pay for it.
    import scipy.optimize  # noqa: F401


def _solve_milp(
    opts: list[list[_Option]], budget: int, time_limit_s: float | None
) -> tuple[list[_Option] | None, Status, str]:
    """Exact solve of the reduced instance: (choice or None, status, message suffix or error message)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array

    flat = [o for kernel_opts in opts for o in kernel_opts]
    owner = np.repeat(np.arange(len(opts)), [len(o) for o in opts])
    n = len(flat)
    c = np.array([o.time_ms for o in flat])
    ws_mib = np.array([o.workspace_bytes for o in flat], dtype=np.float64) / _MIB
    one_per_kernel = csr_array((np.ones(n), (owner, np.arange(n))), shape=(len(opts), n))
    # HiGHS accepts x within its integrality tolerance (1e-6 by default) of 0/1; times a workspace of thousands
    # of MiB that lets a "binary" solution overshoot the budget by kilobytes. 1e-9 (HiGHS allows down to 1e-10)
    # keeps the slack below a byte for workspaces up to ~1 TiB.
    options: dict[str, object] = {"mip_rel_gap": 0.0, "mip_feasibility_tolerance": 1e-9}
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)

    rhs = budget / _MIB
    lower_bound: float | None = None
    cuts: list[np.ndarray] = []
    margin = 0.0
    for attempt in range(_MAX_CUTS + 4):
        constraints = [
            LinearConstraint(one_per_kernel, np.ones(len(opts)), np.ones(len(opts))),
            LinearConstraint(ws_mib.reshape(1, -1), -np.inf, rhs - margin),
        ]
        if cuts:
            constraints.append(LinearConstraint(np.array(cuts), -np.inf, len(opts) - 1.0))
        with warnings.catch_warnings():
            # scipy warns that it passes HiGHS options it does not know (the tolerance) through verbatim.
            warnings.filterwarnings("ignore", message="Unrecognized options", category=RuntimeWarning)
            res = milp(c, integrality=np.ones(n), bounds=Bounds(0, 1), constraints=constraints, options=options)
        if res.x is None:
            if res.status == 1:
                return None, Status.TIME_LIMIT, f"time limit reached before the MILP found a solution: {res.message}"
            status = Status.INFEASIBLE if res.status == 2 else Status.ERROR
            return None, status, f"MILP solver: {res.message}"
        if attempt == 0:
            # The solver's region contains every byte-feasible choice, so its bound is a true lower bound.
            bound = getattr(res, "mip_dual_bound", None)
            lower_bound = float(bound) if bound is not None else float(res.fun)
        picks = _decode(res.x, opts)
        choice = [opts[k][j] for k, j in enumerate(picks)]
        used = sum(o.workspace_bytes for o in choice)
        if used <= budget:
            if attempt == 0:
                return choice, Status.OPTIMAL if res.status == 0 else Status.TIME_LIMIT, ""
            if margin == 0.0 and res.status == 0:
                # Only byte-infeasible choices were cut off, so the solver's optimum is the true optimum.
                return choice, Status.OPTIMAL, f"; {len(cuts)} rounding overshoot(s) cut off"
            t = math.fsum(o.time_ms for o in choice)
            assert lower_bound is not None
            if res.status == 0 and t <= lower_bound + 1e-9 * max(1.0, abs(lower_bound)):
                return choice, Status.OPTIMAL, "; re-solved with a tightened budget after rounding overshoots"
            return (
                choice,
                Status.TIME_LIMIT if res.status == 1 else Status.FEASIBLE,
                (
                    f"; re-solved with a tightened budget after rounding overshoots, optimal within "
                    f"{t - lower_bound:.3g} ms"
                ),
            )
        # Solver tolerance let the MiB row overshoot the byte budget. First exclude exactly that choice (a
        # no-good cut keeps the answer exact); if overshoots keep coming, tighten the row instead.
        if len(cuts) < _MAX_CUTS:
            cut = np.zeros(n)
            cut[np.cumsum([0] + [len(o) for o in opts[:-1]]) + np.array(picks)] = 1.0
            cuts.append(cut)
        else:
            margin = max(2.0 * margin, (used - budget) / _MIB + 1e-9 * max(1.0, rhs))
    return None, Status.ERROR, f"the MILP solver kept exceeding the budget of {budget} bytes by rounding"


def _decode(x: np.ndarray, opts: list[list[_Option]]) -> list[int]:
    """The chosen position in each kernel's options (the largest x of its block)."""
    picks: list[int] = []
    pos = 0
    for kernel_opts in opts:
        picks.append(int(np.argmax(x[pos : pos + len(kernel_opts)])))
        pos += len(kernel_opts)
    return picks


def divide_workspace_greedy(kernels: Sequence[KernelOptions], *, total_workspace_bytes: int) -> DivisionResult:
    """vDNN-style heuristic: start every kernel at its least-workspace plan, then repeatedly make the affordable
    upgrade (any plan of one kernel that is faster and needs more workspace) saving the most time per extra
    byte, until none is affordable. Ties go to the lower kernel index, then the less-workspace plan.

    Status FEASIBLE (not proven optimal) or INFEASIBLE; never better than ``divide_workspace``.
    """
    started = time.perf_counter()
    _validate(kernels, total_workspace_bytes)
    opts = _options(kernels, total_workspace_bytes)
    if isinstance(opts, str):
        return _result(Status.INFEASIBLE, opts, kernels, None, started)
    choice = [kernel_opts[p] for kernel_opts, p in zip(opts, _greedy(opts, total_workspace_bytes), strict=True)]
    return _result(Status.FEASIBLE, _summary("greedy", choice, total_workspace_bytes), kernels, choice, started)
