"""The planner: turns a kernel (key, N, limit, policy) into a micro-batch plan, benchmarking only what the cache
lacks.

The benchmark is a parameter (``Callable[[int], Sequence[AlgoPerf]]``, "measure every algorithm at N = b"): the
shim's bridge passes one that calls back into ``cudnnFind*``; tests pass recorded tables. A size whose
benchmark raises or returns nothing is unusable for this request (logged, not fatal) and is measured again on a
later request; algorithms that could not run come back with an infinite time and are simply never chosen.
"""

from __future__ import annotations

import dataclasses
import math
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ucudnn import config
from ucudnn import policy as _policy
from ucudnn._planner_sharing import SharedBenchmarks, SharedMeasure
from ucudnn.cache import Cache, CacheError, PlanKey, Unallocated, Verdict
from ucudnn.log import get_logger
from ucudnn.optimizer import (
    AlgoPerf,
    BatchSizePolicy,
    DivisionResult,
    KernelOptions,
    MicroBatch,
    Plan,
    PlanResult,
    Status,
    best_plan,
    candidate_batch_sizes,
    divide_workspace,
    keeps_quantum,
    pareto_front,
    parse_policy,
)

__all__ = ["CALL_COST", "MAX_MICRO_BATCHES", "Benchmark", "NetworkKernel", "PlanRequest", "Planner"]

# The device fact the planner keeps: the host time of one cuDNN call, in ms.
CALL_COST = "call_cost_ms"
# The most micro-batches a plan may have: UCUDNN_MAX_MICRO_BATCHES of ucudnn.h, what the shim's reply holds.
MAX_MICRO_BATCHES = 4096

log = get_logger("planner")

# Measures every algorithm at a micro-batch size; an algorithm it could not give memory to is an Unallocated row.
Benchmark = Callable[[int], Sequence[AlgoPerf]]
_T = TypeVar("_T")


@dataclass(frozen=True)
class PlanRequest:
    """One kernel to plan: its key (N excluded) on ``backend_id`` at mini-batch ``batch``, the workspace its plan
    may use (``workspace_limit_bytes``), the batch-size policy, whether only deterministic algorithms may run, how
    many algorithms it has and how to benchmark it at N = b. ``op`` (0-2, as in ucudnn.h) selects policy overrides;
    ``call_cost`` measures the host time of one call (ms) if the device has none stored yet. ``align_quantum``:
    every micro-batch but one must be a multiple of it (a graph whose tensors' declared alignment holds only at
    such offsets; the shim runs the other one last).

    Raises ValueError for a malformed key, backend, batch, limit or algorithm count.
    """

    key: str
    backend_id: str
    batch: int
    workspace_limit_bytes: int
    policy: str | BatchSizePolicy
    deterministic_only: bool
    algo_count: int
    benchmark: Benchmark
    op: int | None = None
    call_cost: Callable[[], float] | None = None
    align_quantum: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"key must be a non-empty str, not {self.key!r}")
        if not isinstance(self.backend_id, str):
            raise ValueError(f"backend_id must be a str, not {self.backend_id!r}")
        _check_int("batch", self.batch, 1)
        _check_int("workspace_limit_bytes", self.workspace_limit_bytes, 0)
        _check_int("algo_count", self.algo_count, 1)
        _check_int("align_quantum", self.align_quantum, 1)

    @classmethod
    def of(cls, request: PlanRequest | None, fields: dict[str, Any]) -> PlanRequest:
        """``request``, or one made of the keyword form's ``fields`` (``plan(key=..., ...)``); not both."""
        if request is None:
            return cls(**fields)
        if fields:
            raise TypeError(f"plan() takes a PlanRequest or keywords, not both ({', '.join(fields)})")
        return request


@dataclass(frozen=True)
class NetworkKernel:
    """One kernel of a network for Workspace Division: its key (N excluded), mini-batch size, number of valid
    algorithms, and how to benchmark it at N = b. ``op`` (0-2, as in ucudnn.h) is used for policy overrides;
    ``align_quantum`` is :class:`PlanRequest`'s (its front holds only plans that keep it)."""

    key: str
    batch: int
    algo_count: int
    benchmark: Benchmark
    op: int | None = None
    align_quantum: int = 1


@dataclass(frozen=True)
class _Measured:
    perfs: tuple[AlgoPerf, ...]
    unusable_sizes: tuple[int, ...]  # benchmark raised or returned nothing
    # measured now without memory for an algorithm within the limit (a plan from them may miss a faster one)
    short_sizes: tuple[int, ...] = ()


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")
    return value


def _optimize(
    optimizer: Callable[..., _T],
    perfs: Sequence[AlgoPerf],
    batch: int,
    workspace_limit_bytes: int,
    policy: BatchSizePolicy,
    deterministic_only: bool,
    **extra: int,
) -> _T:
    """``best_plan`` or ``pareto_front`` of one kernel's measurements (``extra``: their ``quantum``)."""
    return optimizer(
        perfs,
        batch=batch,
        workspace_limit_bytes=workspace_limit_bytes,
        policy=policy,
        deterministic_only=deterministic_only,
        **extra,
    )


def _plannable_sizes(batch: int, policy: BatchSizePolicy) -> tuple[int, ...]:
    """The policy's micro-batch sizes of at least batch / MAX_MICRO_BATCHES: a plan of such parts has at most
    MAX_MICRO_BATCHES of them (and the undivided size is always one)."""
    return tuple(b for b in candidate_batch_sizes(batch, policy) if b * MAX_MICRO_BATCHES >= batch)


def _capped(settings: _policy.WorkspacePolicy, key: str, op: int | None, workspace_limit_bytes: int) -> int:
    """``workspace_limit_bytes`` capped by the policy's override for the kernel, if one matches."""
    override = settings.override_for(key, op)
    return workspace_limit_bytes if override is None else min(workspace_limit_bytes, override.workspace_limit_bytes)


def _floored(plan: Plan, floor: float) -> Plan:
    """``plan`` with every micro-batch charged at least ``floor`` ms."""
    if all(mb.time_ms >= floor for mb in plan.micro_batches):
        return plan
    return Plan(tuple(dataclasses.replace(mb, time_ms=max(mb.time_ms, floor)) for mb in plan.micro_batches))


def _verify_margin() -> float:
    """UCUDNN_VERIFY_MARGIN: how much faster a divided plan must be than the undivided choice."""
    return float(config.get("UCUDNN_VERIFY_MARGIN"))


def _verify_close() -> float:
    """UCUDNN_VERIFY_CLOSE: how close Find must time the runner-up single call for a plan of one call to be
    checked against it."""
    return float(config.get("UCUDNN_VERIFY_CLOSE"))


def _worth_dividing(best: PlanResult, undivided: PlanResult, margin: float) -> PlanResult:
    """``best``, unless it divides the batch and is predicted less than ``margin`` faster than the undivided
    choice: then that choice. A check on real executions keeps a divided plan only if it is measured at least that
    much faster (UCUDNN_VERIFY_MARGIN), so a smaller predicted gain is one the check would almost always undo,
    after timing the slower side on the program's own executions; and a gain that small is within what
    benchmarks mispredict."""
    plan, alone = best.plan, undivided.plan
    if plan is None or alone is None or len(plan.micro_batches) < 2 or best.status is not Status.OPTIMAL:
        return best
    if plan.time_ms < alone.time_ms * (1.0 - margin):
        return best
    gain = 1.0 - plan.time_ms / alone.time_ms if alone.time_ms > 0 else 0.0
    why = (
        f"undivided: the best divided plan ({len(plan.micro_batches)} micro-batches, {plan.time_ms:.6g} ms) is "
        f"predicted {gain:.1%} faster, under UCUDNN_VERIFY_MARGIN ({margin:.0%})"
    )
    return PlanResult(Status.OPTIMAL, alone, why)


def _call(mb: MicroBatch) -> tuple[int, int, int]:
    """What names a step's call: its batch, algorithm and math type."""
    return (mb.batch, mb.algo, mb.math_type)


def _pick_with_slack(front: Sequence[Plan], slack: float) -> PlanResult:
    """The least-workspace plan of a Pareto front whose time is within (1 + slack) of the fastest."""
    if not front:
        return PlanResult(Status.INFEASIBLE, None, "no plan fits the workspace limit")
    fastest = min(p.time_ms for p in front)
    chosen = min((p for p in front if p.time_ms <= fastest * (1.0 + slack)), key=lambda p: p.workspace_bytes)
    return PlanResult(
        Status.OPTIMAL,
        chosen,
        f"least workspace within {slack:.0%} of the fastest ({chosen.time_ms:.6g} ms vs {fastest:.6g} ms)",
    )


class Planner:
    """Plans kernels against a cache. ``Planner()`` keeps everything in memory for its own lifetime.

    ``policy`` supplies the Python-side settings (``deterministic_only``, ``time_slack``, per-kernel overrides)
    on top of each request; None means the policy in force (``ucudnn.policy.current()``), read at each call.
    Thread-safe: the cache serialises its own access, and planning holds no other shared state.
    """

    def __init__(
        self,
        cache: Cache | None = None,
        *,
        policy: _policy.WorkspacePolicy | None = None,
        benchmark_wait_s: float | None = None,
        on_shared: Callable[[SharedBenchmarks], None] | None = None,
    ) -> None:
        self.cache = cache if cache is not None else Cache.in_memory()
        self.policy = policy
        # How long to wait for a size another process is measuring (None: UCUDNN_BENCHMARK_WAIT, read per plan).
        self.benchmark_wait_s = benchmark_wait_s
        # What measuring together with other processes did, summed over this planner's plans; each kernel's share
        # also goes to on_shared (the preload library's stats, from ucudnn._runtime).
        self.shared = SharedBenchmarks()
        self._on_shared = on_shared
        self._call_costs: dict[str, float] = {}
        self._lock = threading.Lock()
        # (key, backend id, b) this planner measured without memory for some algorithm within the request's limit:
        # not measured again in this process (a framework holding the memory holds it for the whole run), measured
        # again by the next one. A run whose unallocated algorithms were all over the limit (the graph benchmark does
        # not time those) is not short: a request under a limit they fit measures it again.
        self._short_here: set[tuple[str, str, int]] = set()

    def learn_call_cost(self, backend_id: str, measure: Callable[[], float]) -> float:
        """The host time of one call on the device of ``backend_id`` (ms): from memory, else the cache, else
        ``measure()`` (stored in the cache: measured once per device). Every micro-batch of a plan is charged at
        least this, so a plan of k micro-batches is never predicted faster than k calls can be issued. 0 when
        it cannot be measured."""
        with self._lock:
            known = self._call_costs.get(backend_id)
        if known is not None:
            return known
        try:
            cost = self.cache.get_fact(backend_id, CALL_COST)
        except (sqlite3.Error, CacheError) as exc:
            log.warning("cannot read the call cost from %s (%s); measuring it", self.cache, exc)
            cost = None
        if cost is None:
            try:
                cost = float(measure())
            except Exception as exc:  # no cost model is better than no plan
                log.warning("cannot measure the host cost of a call (%s); plans are not charged for it", exc)
                return 0.0
            if not (0.0 <= cost < math.inf):
                log.warning("measured a call cost of %r ms; plans are not charged for it", cost)
                return 0.0
            log.info("host cost of one call on %s: %.4g ms", backend_id, cost)
            try:
                self.cache.put_fact(backend_id, CALL_COST, cost)
            except (sqlite3.Error, CacheError) as exc:
                log.warning("cannot store the call cost in %s: %s", self.cache, exc)
        with self._lock:
            self._call_costs[backend_id] = cost
        return cost

    def call_cost_ms(self, backend_id: str) -> float:
        """The call cost learned for ``backend_id`` (0 if none was)."""
        with self._lock:
            return self._call_costs.get(backend_id, 0.0)

    def record_verdict(self, verdict: Verdict) -> None:
        """Store the outcome of a check on real executions, so that later plans for the same workspace skip it."""
        try:
            self.cache.put_verdict(verdict)
        except (sqlite3.Error, CacheError) as exc:
            log.warning("cannot store a verdict in %s: %s", self.cache, exc)

    def settings(self) -> _policy.WorkspacePolicy:
        """The Python-side settings in force for this planner (its own policy, else ``ucudnn.policy.current()``)."""
        return self._settings()

    def _settings(self) -> _policy.WorkspacePolicy:
        """Raises ConfigError for a bad UCUDNN_* value: a planner never guesses (a typo in UCUDNN_DETERMINISTIC
        must not run non-deterministic algorithms); the preload library passes the call through."""
        if self.policy is not None:
            return self.policy
        return _policy.current()

    def plan(self, request: PlanRequest | None = None, /, **fields: Any) -> PlanResult:
        """The plan for one kernel (a :class:`PlanRequest`, or its fields as keywords) whose workspace is at most
        its ``workspace_limit_bytes``.

        A stored plan is returned without benchmarking; otherwise the candidate sizes the cache lacks are
        benchmarked (largest first; sizes another process on the same cache is measuring are waited for, see
        ``benchmark_wait_s``), stored, and the optimizer run. Status OPTIMAL carries the plan; INFEASIBLE
        means nothing fits (the shim passes the call through). Raises ValueError for malformed arguments.
        """
        req = PlanRequest.of(request, fields)
        pol = parse_policy(req.policy)
        settings = self._settings()
        workspace_limit_bytes = _capped(settings, req.key, req.op, req.workspace_limit_bytes)
        deterministic = bool(req.deterministic_only) or settings.deterministic_only
        slack = settings.time_slack
        # A slack plan is not what the plan key (which has no slack column) promises to other readers.
        persist = slack == 0.0
        pk = PlanKey(req.key, req.backend_id, req.batch, pol.value, workspace_limit_bytes, deterministic)

        floor = (
            self.call_cost_ms(req.backend_id)
            if req.call_cost is None
            else self.learn_call_cost(req.backend_id, req.call_cost)
        )
        quantum = req.align_quantum
        if persist:
            hit = self._cached_plan(pk, req.algo_count)
            if hit is not None and not keeps_quantum(hit, quantum):
                log.debug("the cached plan for %s at N=%d breaks the alignment quantum %d; planning afresh",
                          req.key, req.batch, quantum)  # fmt: skip
                hit = None
            if hit is not None:
                log.debug("cached plan for %s at N=%d: %d micro-batch(es)", req.key, req.batch, len(hit.micro_batches))
                cached = PlanResult(Status.OPTIMAL, _floored(hit, floor), "cached plan")
                return self._checked(pk, cached, floor, req.algo_count)

        sizes = _plannable_sizes(req.batch, pol)
        measured = self._measure(
            req.key, req.backend_id, sizes, req.algo_count, req.benchmark, floor, workspace_limit_bytes
        )
        problem = (measured.perfs, req.batch, workspace_limit_bytes, pol, deterministic)
        if slack == 0.0:
            undivided = (measured.perfs, req.batch, workspace_limit_bytes, BatchSizePolicy.UNDIVIDED, deterministic)
            best, alone = _optimize(best_plan, *problem, quantum=quantum), _optimize(best_plan, *undivided)
            result = _worth_dividing(best, alone, _verify_margin())
        else:
            result = _pick_with_slack(_optimize(pareto_front, *problem, quantum=quantum), slack)
        if measured.unusable_sizes:
            note = f" (sizes not benchmarked: {', '.join(map(str, measured.unusable_sizes))})"
            result = PlanResult(result.status, result.plan, result.message + note)
        if measured.short_sizes:
            note = f" (sizes measured without memory for every algorithm: {', '.join(map(str, measured.short_sizes))})"
            result = PlanResult(result.status, result.plan, result.message + note)
        if result.status is Status.OPTIMAL and result.plan is not None:
            # Plans made without some sizes, or from runs that could not try every algorithm within the limit, are
            # not stored: the next request measures those sizes again.
            if persist and not measured.unusable_sizes and not measured.short_sizes:
                self._store_plan(pk, result.plan)
            log.info(
                "planned %s at N=%d under %d B: %d micro-batch(es), %.6g ms, %d B",
                req.key,
                req.batch,
                workspace_limit_bytes,
                len(result.plan.micro_batches),
                result.plan.time_ms,
                result.plan.workspace_bytes,
            )
        else:
            log.info("no plan for %s at N=%d under %d B: %s", req.key, req.batch, workspace_limit_bytes, result.message)
        # A slack plan of one call was chosen for its workspace, not its speed: no runner-up to race it.
        return self._checked(pk, result, floor, req.algo_count, runner_up=persist)

    def _checked(
        self, pk: PlanKey, result: PlanResult, floor: float, algo_count: int, *, runner_up: bool = True
    ) -> PlanResult:
        """``result`` with what a stored check on real executions says about its plan under ``pk``: kept (the
        plan, verified), or replaced by the undivided choice it lost to (that plan, verified). A plan of one call
        with its runner-up, where ``runner_up``."""
        plan = result.plan
        if plan is None:
            return result
        if len(plan.micro_batches) == 1:
            return self._against_runner_up(pk, result, floor, algo_count) if runner_up else result
        # A verdict holds against the undivided choice it was measured against, and only while that is still the
        # undivided choice for what is asked: the fastest single call within this limit. A faster one that fits
        # now (benchmarks measured again, or a verdict earned at a smaller workspace) was never beaten: check again.
        current = self._undivided_choice(pk, floor, algo_count)
        if current is None:
            return result
        settled = self._settled(pk, result, current, "the undivided choice", "micro-batched")
        return result if settled is None else settled

    def _against_runner_up(self, pk: PlanKey, result: PlanResult, floor: float, algo_count: int) -> PlanResult:
        """A plan of one call with the runner-up it is to be checked against (``result.rival``), or with what a
        stored check against that runner-up says: kept (verified), or replaced by the runner-up (verified). A
        verdict holds only while its runner-up is still the runner-up: one measured again since may differ."""
        assert result.plan is not None
        close = _verify_close()
        (chosen,) = result.plan.micro_batches
        if close <= 0.0 or result.verified or chosen.batch != pk.batch:
            return result
        calls = [MicroBatch.from_perf(p) for p in self._single_calls(pk, floor, algo_count)]
        others = [mb for mb in calls if _call(mb) != _call(chosen)]
        rival = min(others, key=lambda mb: (mb.time_ms, mb.workspace_bytes, mb.algo, mb.math_type), default=None)
        if rival is None or rival.time_ms > chosen.time_ms * (1.0 + close):
            return result
        settled = self._settled(pk, result, rival, "the runner-up", "for the plan")
        return dataclasses.replace(result, rival=rival) if settled is None else settled

    def _settled(self, pk: PlanKey, result: PlanResult, rival: MicroBatch, name: str, side: str) -> PlanResult | None:
        """What a stored check of ``result``'s plan against ``rival`` (the single call ``name``) says: the plan kept
        (verified), or ``rival`` in its place (verified); None when no check against ``rival`` is stored."""
        assert result.plan is not None
        try:
            verdict = self.cache.get_verdict(pk, [_call(mb) for mb in result.plan.micro_batches])
        except (sqlite3.Error, CacheError) as exc:
            log.warning("cannot read verdicts from %s (%s); the plan will be checked again", self.cache, exc)
            return None
        if verdict is None:
            return None
        if verdict.undivided[0] != _call(rival):
            log.debug("a stored check of %s at N=%d was against another call than %s; checking again", pk.key,
                      pk.batch, name)  # fmt: skip
            return None
        if verdict.kept:
            return dataclasses.replace(result, message=f"{result.message}; kept against {name} by a check",
                                       verified=True)  # fmt: skip
        why = f"{name}: a check measured {verdict.undivided_ms:.4g} ms vs {verdict.plan_ms:.4g} ms {side}"
        return PlanResult(Status.OPTIMAL, Plan((rival,)), why, verified=True)

    def _single_calls(self, pk: PlanKey, floor: float, algo_count: int) -> list[AlgoPerf]:
        """The single calls at N under ``pk`` (within its limit, deterministic if asked) in the stored benchmark at
        N, their times floored at the call cost; empty when none is stored or it cannot be read."""
        try:
            rows = self.cache.get_benchmark(
                pk.key,
                pk.backend_id,
                pk.batch,
                workspace_limit_bytes=pk.workspace_limit_bytes,
                deterministic_only=pk.deterministic_only,
            )
        except (sqlite3.Error, CacheError):
            return []
        return [
            p if p.time_ms >= floor else dataclasses.replace(p, time_ms=floor)
            for p in rows or []
            if p.algo < algo_count and math.isfinite(p.time_ms)
        ]

    def _undivided_choice(self, pk: PlanKey, floor: float, algo_count: int) -> MicroBatch | None:
        """The undivided choice under ``pk`` as the planner makes it (the fastest single call at N within the limit,
        deterministic if asked), from the stored benchmark at N; None when there is none."""
        rows = self._single_calls(pk, floor, algo_count)
        undivided = BatchSizePolicy.UNDIVIDED
        chosen = _optimize(best_plan, rows, pk.batch, pk.workspace_limit_bytes, undivided, pk.deterministic_only)
        if chosen.plan is None or len(chosen.plan.micro_batches) != 1:
            return None
        return chosen.plan.micro_batches[0]

    def plan_network(
        self,
        kernels: Sequence[NetworkKernel],
        *,
        backend_id: str,
        total_workspace_bytes: int,
        policy: str | BatchSizePolicy,
        deterministic_only: bool = False,
        time_limit_s: float | None = None,
    ) -> DivisionResult:
        """Workspace Division: one plan per kernel, minimising the total time with the plans' workspaces summing
        to at most ``total_workspace_bytes``. ``result.plans[i]`` is kernel ``i``'s plan.

        Each kernel's candidates are its Pareto front under the whole budget (capped by a matching policy
        override), computed from cached benchmarks plus whatever is missing. The division itself is not cached:
        it depends on every kernel of the network, and re-solving from cached fronts takes milliseconds.
        """
        _check_int("total_workspace_bytes", total_workspace_bytes, 0)
        parse_policy(policy)
        options = [
            KernelOptions(
                k.key,
                self.kernel_front(
                    k,
                    backend_id=backend_id,
                    workspace_limit_bytes=total_workspace_bytes,
                    policy=policy,
                    deterministic_only=deterministic_only,
                ),
            )
            for k in kernels
        ]
        return divide_workspace(options, total_workspace_bytes=total_workspace_bytes, time_limit_s=time_limit_s)

    def kernel_front(
        self,
        kernel: NetworkKernel,
        *,
        backend_id: str,
        workspace_limit_bytes: int,
        policy: str | BatchSizePolicy,
        deterministic_only: bool = False,
    ) -> tuple[Plan, ...]:
        """One kernel's Pareto front (plans by increasing workspace, strictly decreasing time) under
        ``workspace_limit_bytes`` (capped by a matching policy override), from cached benchmarks plus whatever is
        missing, which ``kernel.benchmark`` measures and the cache stores. Empty when nothing fits."""
        _check_int("batch", kernel.batch, 1)
        _check_int("algo_count", kernel.algo_count, 1)
        _check_int("align_quantum", kernel.align_quantum, 1)
        _check_int("workspace_limit_bytes", workspace_limit_bytes, 0)
        pol = parse_policy(policy)
        settings = self._settings()
        deterministic = bool(deterministic_only) or settings.deterministic_only
        workspace_limit_bytes = _capped(settings, kernel.key, kernel.op, workspace_limit_bytes)
        sizes = _plannable_sizes(kernel.batch, pol)
        floor = self.call_cost_ms(backend_id)
        measured = self._measure(
            kernel.key, backend_id, sizes, kernel.algo_count, kernel.benchmark, floor, workspace_limit_bytes
        )
        problem = (measured.perfs, kernel.batch, workspace_limit_bytes, pol, deterministic)
        return _optimize(pareto_front, *problem, quantum=kernel.align_quantum)

    # ---------------------------------------------------------------- internals

    def _cached_plan(self, pk: PlanKey, algo_count: int) -> Plan | None:
        try:
            return self.cache.get_plan(pk, algo_count=algo_count)
        except (sqlite3.Error, CacheError) as exc:
            log.warning("cannot read plans from %s (%s); planning afresh", self.cache, exc)
            return None

    def _store_plan(self, pk: PlanKey, plan: Plan) -> None:
        try:
            self.cache.put_plan(pk, plan)
        except (sqlite3.Error, CacheError) as exc:
            log.warning("cannot store a plan in %s: %s", self.cache, exc)

    def _measure(
        self,
        key: str,
        backend_id: str,
        sizes: Sequence[int],
        algo_count: int,
        benchmark: Benchmark,
        floor: float,
        limit: int,
    ) -> _Measured:
        """Usable measurements at ``sizes`` (cached where possible), with algorithms outside range(algo_count)
        and algorithms that could not run dropped, each time at least ``floor`` ms (the cost of a call).

        A stored run that could not give memory to an algorithm within ``limit`` (an ``Unallocated`` row, stored as
        ``UNALLOCATED``, never as an algorithm that cannot run) is measured again, memory may be free now -- once per
        process: a size this planner measured short of memory is taken as it is. A plan made from a run short of
        memory for its limit is not stored."""
        wait_s = self._benchmark_wait()
        try:
            # The runs' marks first: a run stored after this read bears another mark, even if it was stamped
            # before (claims tell new runs from the ones read here by these marks, never by time).
            seen = self.cache.run_marks(key, backend_id, sizes) if wait_s > 0 and self.cache.shared else {}
            stored = self.cache.get_benchmarks(key, backend_id, sizes, complete_within=limit)
        except (sqlite3.Error, CacheError) as exc:
            log.warning("cannot read benchmarks from %s (%s); benchmarking afresh", self.cache, exc)
            seen, stored = {}, {}
        # Sizes this process measured short of memory, incomplete for this limit: taken as they are, in one read.
        again = [b for b in sizes if b not in stored and (key, backend_id, b) in self._short_here]
        try:
            taken = self.cache.get_benchmarks(key, backend_id, again) if again else {}
        except (sqlite3.Error, CacheError):
            taken = {}
        stored |= taken
        unusable: list[int] = []
        short: list[int] = sorted(taken)

        def measure_here(b: int) -> None:
            rows = self._run_benchmark(key, b, benchmark)
            if rows is None:
                unusable.append(b)
                return
            unallocated = [p for p in rows if isinstance(p, Unallocated) and p.workspace_bytes <= limit]
            if unallocated:
                self._short_here.add((key, backend_id, b))
                short.append(b)
                log.info("benchmark of %s at b=%d could not allocate memory for %d algorithm(s) within %d B",
                         key, b, len(unallocated), limit)  # fmt: skip
            try:
                self.cache.put_benchmark(key, backend_id, b, rows)
            except (sqlite3.Error, CacheError) as exc:
                log.warning("cannot store benchmarks of %s at b=%d in %s: %s", key, b, self.cache, exc)
            stored[b] = rows

        missing = [b for b in sorted(sizes, reverse=True) if b not in stored]
        if wait_s > 0 and self.cache.shared and missing:
            sharing = SharedMeasure(self.cache, key, backend_id, limit, wait_s, seen, measure_here, stored)
            self._note_shared(sharing.run(missing))
        else:
            for b in missing:
                measure_here(b)
        perfs = tuple(
            p if p.time_ms >= floor else dataclasses.replace(p, time_ms=floor)
            for b in sorted(stored)
            for p in stored[b]
            if 0 <= p.algo < algo_count and math.isfinite(p.time_ms) and p.time_ms >= 0
        )
        return _Measured(perfs, tuple(sorted(unusable)), tuple(sorted(short)))

    def _note_shared(self, tally: SharedBenchmarks) -> None:
        if not tally:
            return
        with self._lock:
            self.shared += tally
        if self._on_shared is not None:
            try:
                self._on_shared(tally)
            except Exception as exc:  # a report is not worth failing a plan over
                log.debug("cannot report shared benchmarks (%s)", exc)

    def _benchmark_wait(self) -> float:
        """Seconds to wait for another process's benchmark (UCUDNN_BENCHMARK_WAIT unless given to the planner);
        ConfigError for a bad value, like every other setting the planner reads."""
        if self.benchmark_wait_s is not None:
            return self.benchmark_wait_s
        return float(config.get("UCUDNN_BENCHMARK_WAIT"))

    @staticmethod
    def _run_benchmark(key: str, b: int, benchmark: Benchmark) -> list[AlgoPerf] | None:
        try:
            raw = list(benchmark(b))
        except Exception as exc:  # any failure of one size must not fail the plan
            log.warning(
                "benchmark of %s at b=%d failed (%s: %s); that size is not used", key, b, type(exc).__name__, exc
            )
            return None
        rows = [p for p in raw if isinstance(p, AlgoPerf) and p.batch == b]
        if len(rows) != len(raw):
            log.warning("benchmark of %s at b=%d returned %d malformed row(s); ignored", key, b, len(raw) - len(rows))
        rows = [p for p in rows if p.algo >= 0 and p.workspace_bytes >= 0 and p.math_type >= 0]
        if not rows:
            log.info("benchmark of %s at b=%d returned no algorithms; that size is not used", key, b)
            return None
        return rows
