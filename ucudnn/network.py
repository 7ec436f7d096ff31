"""Workspace Division in the preload path: one workspace budget shared by the kernels a process runs.

With ``UCUDNN_TOTAL_WORKSPACE_SIZE`` > 0 (or ``WorkspacePolicy(total_workspace_bytes=...)`` applied), the planner
callback sends every request through :class:`Network` instead of planning the kernel on its own limit
(Workspace Reuse). How it works:

* **No registration step.** A kernel joins the network the first time the shim asks for a plan for it (its
  first Get/Find, workspace-size query or execution). A member is a kernel key *and* its mini-batch size N: the
  same layer run at another N is another workload with its own plan, so it gets its own share.
* **Re-division on arrival.** When a member joins, its candidate micro-batch sizes are benchmarked through the
  request (only what the SQLite cache lacks), then the budget is divided again over every member so far:
  each member's Pareto front (cached per member, computed from cached benchmark rows: nothing is measured
  again) goes into ``ucudnn.optimizer.divide_workspace``, the exact multiple-choice-knapsack ILP. If any other
  member's share changed, ``ucudnn_clear_plans()`` drops the shim's in-memory plans, so each kernel's next call
  plans again under its new share (a SQLite lookup or a DP on cached rows). Unlike the original μ-cuDNN nothing
  is re-measured, and no buffer is freed: the framework owns its workspace.
* **A kernel's share is the workspace of the plan the division chose for it.** Its request is then planned by
  :meth:`Planner.plan` under ``min(request limit, share)``. The best plan under the share *is* the division's
  choice (a Pareto front's point is the best plan under its own workspace), so the shim runs the ILP's answer;
  a caller that offers less workspace than its share gets the best plan under what it offers, as in Workspace
  Reuse. The shim asks with the whole budget as the limit (``uc_planning_limit``), caps execution at the
  caller's workspace, and caches what it gets under that limit as usual.
* **The budget holds.** Every plan in force is at most its kernel's share and the shares sum to at most the
  budget. A plan another thread was making while the plans were cleared is used for its call but not cached
  (``uc_cache_put``'s view check), so no stale plan outlives a re-division.
* **A budget too small.** A kernel for which nothing fits the whole budget (every algorithm needs more, or no
  deterministic one when determinism is required) is left out of the division and passes through, as a kernel
  with no plan does under Workspace Reuse. If the least-workspace plans of the others together still exceed the
  budget, there is no way to honour it: each of them gets its least-workspace plan (the closest to the budget
  there is), the division's status is ``over_budget`` and a warning says by how much. With the cuDNN and host
  backends this needs a kernel without a zero-workspace algorithm: a budget of 1 byte normally means "every
  kernel at zero workspace".
* **One network per backend.** Members are grouped by the request's ``backend_id`` (device model, cuDNN
  version, library); each group divides the whole budget. Changing the budget, the batch-size policy, the
  determinism setting or the overrides (``ucudnn.policy.apply``) re-divides over the members already known.
* **What is exposed.** Each division is logged at info level, reported to the shim (``ucudnn_note_division``:
  the stats' ``divisions`` counter and ``division`` object, also in ``UCUDNN_STATS_FILE``), and available in
  Python as :meth:`Network.division` (per-kernel shares; ``ucudnn._runtime.network()`` in a process with the
  shim).
* **Not persisted.** Membership lives in the process: a second run of the same program re-divides as kernels
  arrive, from cached benchmarks and cached plans, so it measures nothing; only its first iteration runs some
  kernels under shares that are later reduced. Persisting the kernel set would need a new table (a cache schema
  change, which moves existing caches aside) and a notion of which runs are "the same network".
* ``UCUDNN_TIME_SLACK`` applies within a share (the least-workspace plan within the slack under it).
* **Cost.** A division is solved only when a kernel joins or the settings change; a synthetic network of 150
  kernels took about 5 s of solving in all (the last solve about 50 ms) during its first iteration. HiGHS may
  printf() diagnostics while it solves; file descriptor 1 points at stderr meanwhile, so the host's stdout stays
  clean.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ucudnn import policy as _policy
from ucudnn._stdio import native_stdout_to_stderr
from ucudnn.log import get_logger
from ucudnn.optimizer import (
    AlgoPerf,
    DivisionResult,
    KernelOptions,
    Plan,
    PlanResult,
    Status,
    divide_workspace,
    divide_workspace_greedy,
    parse_policy,
)
from ucudnn.planner import Benchmark, NetworkKernel, Planner, PlanRequest

__all__ = ["OVER_BUDGET", "Division", "Network", "Share"]

log = get_logger("network")

# Status of a division whose least-workspace plans exceed the budget.
OVER_BUDGET = "over_budget"


@dataclass(frozen=True)
class Share:
    """One member's part of a division: its plan (None: nothing fits the budget, the kernel passes through)."""

    key: str
    batch: int
    plan: Plan | None

    @property
    def workspace_bytes(self) -> int | None:
        return None if self.plan is None else self.plan.workspace_bytes

    @property
    def time_ms(self) -> float | None:
        return None if self.plan is None else self.plan.time_ms


@dataclass(frozen=True)
class Division:
    """The division in force for one backend: ``shares`` in arrival order of the members."""

    backend_id: str
    policy: str
    budget_bytes: int
    status: str  # a Status value of the solver ("optimal", "feasible", "time_limit") or OVER_BUDGET
    message: str
    shares: tuple[Share, ...]
    total_time_ms: float
    total_workspace_bytes: int
    solve_time_s: float

    def share_of(self, key: str, batch: int) -> Share | None:
        return next((s for s in self.shares if s.key == key and s.batch == batch), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "backend_id": self.backend_id,
            "policy": self.policy,
            "budget_bytes": self.budget_bytes,
            "status": self.status,
            "message": self.message,
            "total_time_ms": self.total_time_ms,
            "total_workspace_bytes": self.total_workspace_bytes,
            "solve_time_s": self.solve_time_s,
            "kernels": [
                {"key": s.key, "batch": s.batch, "workspace_bytes": s.workspace_bytes, "time_ms": s.time_ms}
                for s in self.shares
            ],
        }


@dataclass(frozen=True)
class _Member:
    key: str
    batch: int
    op: int | None
    algo_count: int
    quantum: int = 1  # the request's align_quantum: the member's front keeps it


@dataclass(frozen=True)
class _Context:
    """What a division depends on besides its members."""

    budget: int
    policy: str
    deterministic_only: bool
    overrides: tuple[_policy.KernelOverride, ...]


def _no_benchmark(batch: int) -> Sequence[AlgoPerf]:
    # A member whose request is over has no benchmark context: only its cached rows count.
    return ()


class Network:
    """The members seen so far and the division of the budget over them (per backend). Thread-safe.

    ``clear_plans`` is called when a re-division changed the share of a member other than the one arriving
    (the shim's ``ucudnn_clear_plans``); ``note`` gets every new division (the shim's ``ucudnn_note_division``).
    """

    def __init__(
        self,
        planner: Planner,
        *,
        clear_plans: Callable[[], None] | None = None,
        note: Callable[[Division], None] | None = None,
    ) -> None:
        self.planner = planner
        self._clear_plans = clear_plans
        self._note = note
        self._lock = threading.Lock()
        self._members: dict[str, dict[tuple[str, int], _Member]] = {}
        self._fronts: dict[tuple[str, str, int, int], tuple[_Context, tuple[Plan, ...]]] = {}
        self._current: dict[str, tuple[_Context, Division]] = {}
        self.divisions = 0  # divisions solved
        self.clears = 0  # times the shim's plans were dropped because shares changed

    def division(self, backend_id: str | None = None) -> Division | None:
        """The division in force for ``backend_id`` (None: the only or most recently divided backend)."""
        with self._lock:
            if backend_id is None:
                return next(reversed(self._current.values()))[1] if self._current else None
            found = self._current.get(backend_id)
            return None if found is None else found[1]

    def plan(self, request: PlanRequest | None = None, /, **fields: Any) -> PlanResult:
        """:meth:`Planner.plan` under the kernel's share of the budget (joining the network if new); plain
        :meth:`Planner.plan` when no budget is set."""
        req = PlanRequest.of(request, fields)
        if req.call_cost is not None:  # before any front is computed: fronts charge each micro-batch for its call
            self.planner.learn_call_cost(req.backend_id, req.call_cost)
            req = dataclasses.replace(req, call_cost=None)
        settings = self.planner.settings()
        budget = settings.total_workspace_bytes or 0
        if budget <= 0:
            return self.planner.plan(req)
        ctx = _Context(budget, parse_policy(req.policy).value, settings.deterministic_only, settings.overrides)
        with self._lock:
            members = self._members.setdefault(req.backend_id, {})
            ident = (req.key, req.batch)
            arriving = ident not in members
            requantized = not arriving and members[ident].quantum != req.align_quantum
            if arriving or requantized:
                members[ident] = _Member(req.key, req.batch, req.op, req.algo_count, req.align_quantum)
            current = self._current.get(req.backend_id)
            if arriving or requantized or current is None or current[0] != ctx:
                division = self._divide(req.backend_id, ctx, ident, req.benchmark)
                self._publish(division, None if current is None else current[1], ident if arriving else None)
                self._current[req.backend_id] = (ctx, division)
            else:
                division = current[1]
            share = division.share_of(req.key, req.batch)
            if share is None or share.plan is None:
                return PlanResult(
                    Status.INFEASIBLE, None, f"nothing fits the workspace budget of {budget} bytes (passed through)"
                )
            workspace_limit_bytes = min(req.workspace_limit_bytes, share.plan.workspace_bytes)
            return self.planner.plan(dataclasses.replace(req, workspace_limit_bytes=workspace_limit_bytes))

    # ---------------------------------------------------------------- internals

    def _front(self, backend_id: str, ctx: _Context, m: _Member, benchmark: Benchmark) -> tuple[Plan, ...]:
        fk = (backend_id, m.key, m.batch, m.quantum)
        known = self._fronts.get(fk)
        if known is not None and known[0] == ctx:
            return known[1]
        kernel = NetworkKernel(m.key, m.batch, m.algo_count, benchmark, m.op, m.quantum)
        front = self.planner.kernel_front(
            kernel, backend_id=backend_id, workspace_limit_bytes=ctx.budget, policy=ctx.policy
        )
        self._fronts[fk] = (ctx, front)
        return front

    def _divide(self, backend_id: str, ctx: _Context, arriving: tuple[str, int], benchmark: Benchmark) -> Division:
        members = list(self._members[backend_id].values())
        fronts = [
            self._front(backend_id, ctx, m, benchmark if (m.key, m.batch) == arriving else _no_benchmark)
            for m in members
        ]
        fitting = [i for i, f in enumerate(fronts) if f]
        options = [KernelOptions(f"{members[i].key} @N={members[i].batch}", fronts[i]) for i in fitting]
        result = _solve(options, ctx.budget)
        chosen: dict[int, Plan] = {}
        if result.plans and all(p is not None for p in result.plans):
            status, message = result.status.value, result.message
            for i, p in zip(fitting, result.plans, strict=True):
                assert p is not None
                chosen[i] = p
        else:
            for i in fitting:
                chosen[i] = fronts[i][0]  # least workspace
            need = sum(p.workspace_bytes for p in chosen.values())
            status = OVER_BUDGET
            message = (
                f"the least-workspace plans of {len(chosen)} kernel(s) need {need} bytes together, more than the "
                f"budget of {ctx.budget} bytes; each runs its least-workspace plan ({result.message})"
            )
            log.warning("workspace division: %s", message)
        left_out = len(members) - len(fitting)
        if left_out:
            message += f"; {left_out} kernel(s) with nothing under the budget pass through"
        shares = tuple(Share(m.key, m.batch, chosen.get(i)) for i, m in enumerate(members))
        plans = list(chosen.values())
        self.divisions += 1
        return Division(
            backend_id=backend_id,
            policy=ctx.policy,
            budget_bytes=ctx.budget,
            status=status,
            message=message,
            shares=shares,
            total_time_ms=math.fsum(p.time_ms for p in plans),
            total_workspace_bytes=sum(p.workspace_bytes for p in plans),
            solve_time_s=result.solve_time_s,
        )

    def _publish(self, new: Division, old: Division | None, arriving: tuple[str, int] | None) -> None:
        """Log and report ``new``; drop the shim's plans if a kernel other than the arriving one (which has none
        cached yet) got another plan, or if the settings changed (``arriving`` None)."""
        before = {} if old is None else {(s.key, s.batch): s.plan for s in old.shares}
        changed = [
            s
            for s in new.shares
            if (s.key, s.batch) != arriving and ((s.key, s.batch) not in before or before[(s.key, s.batch)] != s.plan)
        ]
        log.info(
            "workspace division over %d kernel(s) %s: %d of %d bytes, predicted %.6g ms (%s, solved in %.3g s); "
            "%d other kernel(s) get a new share",
            len(new.shares),
            "after a change of settings" if arriving is None else f"as {arriving[0]} at N={arriving[1]} joins",
            new.total_workspace_bytes,
            new.budget_bytes,
            new.total_time_ms,
            new.status,
            new.solve_time_s,
            len(changed),
        )
        for s in new.shares:
            log.debug("  share of %s at N=%d: %s bytes, %s ms", s.key, s.batch, s.workspace_bytes, s.time_ms)
        if changed or arriving is None:
            self.clears += 1
            if self._clear_plans is not None:
                self._clear_plans()
        if self._note is not None:
            self._note(new)


def _solve(options: list[KernelOptions], budget: int) -> DivisionResult:
    if not options:
        return DivisionResult(Status.OPTIMAL, "no kernel to divide over", (), 0.0, 0, 0.0)
    try:
        with native_stdout_to_stderr():
            return divide_workspace(options, total_workspace_bytes=budget)
    except ImportError as exc:  # scipy missing: the greedy needs nothing
        log.warning("the exact workspace division needs scipy (%s); using the greedy heuristic", exc)
        return divide_workspace_greedy(options, total_workspace_bytes=budget)
