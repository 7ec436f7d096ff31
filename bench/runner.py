"""Run problems x ops x workspace limits x policies: undivided cuDNN against ucudnn through the preload library.

Per problem and op:

1. ``Find`` on the cuDNN library itself at the full batch N (all algorithms). The *ceiling* is the fastest
   successful algorithm whatever its workspace; for each limit the *undivided* baseline is the fastest one whose
   workspace fits -- what cuDNN alone does under that limit. Both are then executed and timed.
2. For each limit and policy, a framework-like sequence through the preload library (PyTorch's legacy path):
   ``Get*Algorithm_v7`` (ucudnn plans here: the first result is its plan, time = predicted, memory = the plan's
   workspace; the wall time of this call is reported as ``planning_ms``), the workspace-size query for that
   algorithm, a workspace of that size, then the timed executions.
   The plan (micro-batches, prediction) is read back with ``ucudnn_last_plan_json``.
3. ucudnn's output is compared with the undivided output from the same inputs. Outputs are filled with NaN before
   every configuration (beta = 0 must overwrite them), so a micro-batch that was skipped cannot go unnoticed.

Every execution is warmed up, then timed ``repeat`` times; the median is reported. The undivided baseline and
ucudnn are timed alternately, so that both see the same background load on a shared machine.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ucudnn.bench.backends import Backend
from ucudnn.bench.capi import CudnnError, Descriptors, Perf, algo_name
from ucudnn.bench.problems import Problem

ProgressFn = Callable[[int, int, str], None]


@dataclass
class Row:
    """One measured configuration. Times in ms, sizes in bytes; ``speedup`` = undivided_ms / ucudnn_ms."""

    problem: str
    origin: str
    shape: str
    w: int
    h: int
    c: int
    n: int
    k: int
    filter_w: int
    filter_h: int
    pad_w: int
    pad_h: int
    stride_w: int
    stride_h: int
    op: str
    limit_bytes: int
    policy: str
    status: str = "ok"  # "ok" or "skipped"
    reason: str = ""
    timing: str = ""
    repeat: int = 0
    undivided_algo: str = ""
    undivided_workspace_bytes: int = 0
    undivided_ms: float = math.nan
    undivided_find_ms: float = math.nan
    ceiling_algo: str = ""
    ceiling_workspace_bytes: int = 0
    ceiling_ms: float = math.nan
    ucudnn_ms: float = math.nan
    ucudnn_times_ms: list[float] = field(default_factory=list)
    predicted_ms: float = math.nan
    plan_workspace_bytes: int = 0
    micro_batches: list[dict[str, Any]] = field(default_factory=list)
    planning_ms: float = math.nan
    speedup: float = math.nan
    predicted_speedup: float = math.nan
    ceiling_speedup: float = math.nan
    max_abs_error: float = math.nan
    rel_error: float = math.nan
    tolerance: float = math.nan
    output_match: bool = False
    passthrough_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunConfig:
    ops: Sequence[str]
    limits: Sequence[int]
    policies: Sequence[str]
    repeat: int = 3
    warmup: int = 1
    tolerance: float | None = None  # None: the backend's default
    seed: int = 1234


@dataclass
class _Case:
    """Buffers and reference results of one problem x op, shared by every limit and policy."""

    problem: Problem
    op: str
    d: Descriptors
    in0: Any
    in1: Any
    out: Any
    perfs: list[Perf]
    outputs: dict[int, np.ndarray[Any, np.dtype[np.float32]]] = field(default_factory=dict)


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else math.nan


def _base_row(p: Problem, op: str, limit: int, policy: str, backend: Backend, cfg: RunConfig) -> Row:
    return Row(
        problem=p.label,
        origin=p.origin,
        shape=p.describe(),
        w=p.w,
        h=p.h,
        c=p.c,
        n=p.n,
        k=p.k,
        filter_w=p.filter_w,
        filter_h=p.filter_h,
        pad_w=p.pad_w,
        pad_h=p.pad_h,
        stride_w=p.stride_w,
        stride_h=p.stride_h,
        op=op,
        limit_bytes=limit,
        policy=policy,
        timing=backend.timing,
        repeat=cfg.repeat,
        tolerance=cfg.tolerance if cfg.tolerance is not None else backend.default_tolerance,
    )


def _micro_batches(plan: dict[str, Any], op: str) -> list[dict[str, Any]]:
    """Normalise the plan's micro-batches to ``[{batch, algo, algo_name, count}]``, consecutive repeats merged."""
    raw = plan.get("micro_batches") or []
    out: list[dict[str, Any]] = []
    for item in raw:
        if isinstance(item, dict):
            b, a = int(item.get("batch", 0)), int(item.get("algo", -1))
        else:
            b, a = int(item[0]), int(item[1])
        if out and out[-1]["batch"] == b and out[-1]["algo"] == a:
            out[-1]["count"] += 1
        else:
            out.append({"batch": b, "algo": a, "algo_name": algo_name(op, a), "count": 1})
    return out


def format_micro_batches(mbs: Sequence[dict[str, Any]]) -> str:
    """``4 x b8 GEMM + 1 x b2 IMPLICIT_GEMM``: micro-batch count x micro-batch size, then the algorithm."""
    return " + ".join(f"{m['count']} x b{m['batch']} {m['algo_name']}" for m in mbs)


class Runner:
    def __init__(self, backend: Backend, cfg: RunConfig, progress: ProgressFn | None = None) -> None:
        self.b = backend
        self.cfg = cfg
        self.progress = progress or (lambda done, total, text: None)

    def run(self, problems: Sequence[Problem]) -> list[Row]:
        rows: list[Row] = []
        total = len(problems) * len(self.cfg.ops)
        done = 0
        for p in problems:
            for op in self.cfg.ops:
                self.progress(done, total, f"{p.label} {op}")
                rows += self._problem_op(p, op)
                done += 1
        self.progress(done, total, "done")
        return rows

    def _skipped(self, p: Problem, op: str, reason: str) -> list[Row]:
        out: list[Row] = []
        for limit in self.cfg.limits:
            for policy in self.cfg.policies:
                row = _base_row(p, op, limit, policy, self.b, self.cfg)
                row.status, row.reason = "skipped", reason
                out.append(row)
        return out

    def _problem_op(self, p: Problem, op: str) -> list[Row]:
        try:
            case = self._prepare(p, op)
        except (CudnnError, MemoryError) as exc:
            return self._skipped(p, op, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # e.g. CuPy's OutOfMemoryError, whose type lives in CuPy
            if "memory" not in type(exc).__name__.lower():
                raise
            return self._skipped(p, op, f"{type(exc).__name__}: {exc}")
        try:
            return self._measure(case)
        finally:
            self.b.real.destroy_descriptors(case.d)

    def _prepare(self, p: Problem, op: str) -> _Case:
        d = self.b.real.make_descriptors(
            p.n, p.c, p.h, p.w, p.k, p.filter_h, p.filter_w, (p.pad_h, p.pad_w), (p.stride_h, p.stride_w)
        )
        try:
            s0, s1, s2 = d.operand_shapes(op)
            in0 = self.b.random(s0, self.cfg.seed)
            in1 = self.b.random(s1, self.cfg.seed + 1)
            out = self.b.filled(s2, math.nan)
            perfs = self.b.real.find(op, self.b.handle, d)
        except BaseException:
            self.b.real.destroy_descriptors(d)
            raise
        return _Case(p, op, d, in0, in1, out, perfs)

    def _undivided_call(self, case: _Case, perf: Perf) -> Callable[[], None]:
        """One call of ``perf.algo`` on the cuDNN library itself, with a workspace of the size Find reported."""
        b = self.b

        def call() -> None:
            ws = b.workspace(perf.memory_bytes)
            b.real.execute(
                case.op,
                b.handle,
                case.d,
                perf.algo,
                b.ptr(case.in0),
                b.ptr(case.in1),
                b.ptr(case.out),
                ws,
                perf.memory_bytes,
            )

        return call

    def _reference(self, case: _Case, perf: Perf) -> None:
        """Run ``perf.algo`` once from a NaN-filled output and keep the result (once per algorithm)."""
        if perf.algo not in case.outputs:
            self.b.fill(case.out, math.nan)
            self._undivided_call(case, perf)()
            case.outputs[perf.algo] = self.b.to_numpy(case.out)

    def _measure(self, case: _Case) -> list[Row]:
        p, op = case.problem, case.op
        ok = sorted((x for x in case.perfs if x.status == 0), key=lambda x: (x.time_ms, x.memory_bytes, x.algo))
        if not ok:
            statuses = ", ".join(f"{algo_name(op, x.algo)}={x.status}" for x in case.perfs) or "no results"
            return self._skipped(p, op, f"no algorithm succeeded at N={p.n} ({statuses})")
        ceiling = ok[0]
        try:
            self._reference(case, ceiling)
            ceiling_ms = _median(self.b.time_ms(self._undivided_call(case, ceiling), self.cfg.warmup, self.cfg.repeat))
        except CudnnError as exc:
            return self._skipped(p, op, f"undivided {algo_name(op, ceiling.algo)} failed: {exc}")
        rows: list[Row] = []
        for limit in self.cfg.limits:
            fits = [x for x in ok if x.memory_bytes <= limit]
            for policy in self.cfg.policies:
                row = _base_row(p, op, limit, policy, self.b, self.cfg)
                row.ceiling_algo = algo_name(op, ceiling.algo)
                row.ceiling_workspace_bytes = ceiling.memory_bytes
                row.ceiling_ms = ceiling_ms
                if not fits:
                    row.status, row.reason = "skipped", "no undivided algorithm fits the limit"
                    rows.append(row)
                    continue
                base = fits[0]
                row.undivided_algo = algo_name(op, base.algo)
                row.undivided_workspace_bytes = base.memory_bytes
                row.undivided_find_ms = base.time_ms
                try:
                    self._reference(case, base)
                    self._run_ucudnn(case, base, row)
                except CudnnError as exc:
                    row.status, row.reason = "skipped", str(exc)
                if row.status == "ok":
                    self._compare(case, base, row)
                rows.append(row)
        return rows

    def _run_ucudnn(self, case: _Case, base: Perf, row: Row) -> None:
        """Plan through the preload library, then time it interleaved with the undivided baseline.

        Interleaving (undivided, ucudnn, undivided, ucudnn, ...) keeps both medians under the same background
        load on a shared machine; the last call is ucudnn's, so its output is what ``_compare`` reads.
        """
        b, op = self.b, case.op
        b.shim.clear_plans()  # planning is then timed from the SQLite cache or the benchmark, never memory
        b.shim.set_option("UCUDNN_BATCH_SIZE_POLICY", row.policy)
        b.shim.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", str(row.limit_bytes))
        # PyTorch's legacy path: Get*_v7 (ucudnn plans here and reports its plan first), then the workspace
        # query for that algorithm. Find through ucudnn would also run the real Find at N, which is not planning.
        t0 = time.perf_counter()
        perfs = b.hooked.get_v7(op, b.handle, case.d)
        row.planning_ms = (time.perf_counter() - t0) * 1e3
        # A framework under a memory limit takes the first result whose workspace it can afford. When ucudnn
        # plans, that is entry 0 (its plan fits by construction); when the call passes through, it is cuDNN's
        # best fitting algorithm -- never one over the limit, which would flatter ucudnn.
        chosen = next((x for x in perfs if x.status == 0 and x.memory_bytes <= row.limit_bytes), None)
        if chosen is None:
            raise CudnnError("ucudnn Get_v7", -1, "no successful result within the limit through the preload library")
        ws_bytes = b.hooked.workspace_size(op, b.handle, case.d, chosen.algo)
        if ws_bytes > row.limit_bytes:
            why = f"{ws_bytes} B for algo {chosen.algo} exceeds the limit {row.limit_bytes} B"
            raise CudnnError("ucudnn Get*WorkspaceSize", -1, why)
        plan = b.shim.last_plan()
        passthrough_before = int(b.shim.stats().get("passthrough", 0))

        def ucudnn_call() -> None:
            ws = b.workspace(ws_bytes)
            b.hooked.execute(
                op, b.handle, case.d, chosen.algo, b.ptr(case.in0), b.ptr(case.in1), b.ptr(case.out), ws, ws_bytes
            )

        undivided_call = self._undivided_call(case, base)
        b.time_ms(undivided_call, self.cfg.warmup, 0)
        b.fill(case.out, math.nan)
        b.time_ms(ucudnn_call, self.cfg.warmup, 0)
        undivided: list[float] = []
        ucudnn: list[float] = []
        for _ in range(self.cfg.repeat):
            undivided += b.time_ms(undivided_call, 0, 1)
            b.fill(case.out, math.nan)
            ucudnn += b.time_ms(ucudnn_call, 0, 1)
        executed = b.shim.last_plan() or plan
        row.passthrough_calls = int(b.shim.stats().get("passthrough", 0)) - passthrough_before
        row.undivided_ms = _median(undivided)
        row.ucudnn_times_ms = ucudnn
        row.ucudnn_ms = _median(ucudnn)
        # No plan ran (every call passed through): there is no prediction to compare with.
        row.predicted_ms = float(executed["time_ms"]) if "time_ms" in executed else math.nan
        row.plan_workspace_bytes = int(executed.get("workspace_bytes", ws_bytes))
        row.micro_batches = _micro_batches(executed, op)
        if row.passthrough_calls:
            row.reason = f"{row.passthrough_calls} call(s) passed through unplanned"

    def _compare(self, case: _Case, base: Perf, row: Row) -> None:
        ref = case.outputs[base.algo]
        got = self.b.to_numpy(case.out)
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        row.max_abs_error = float(np.max(diff)) if diff.size else 0.0
        row.rel_error = row.max_abs_error / scale if scale > 0 else row.max_abs_error
        # NaN anywhere (a skipped micro-batch leaves the NaN fill) makes the comparison false.
        row.output_match = bool(np.all(np.isfinite(got))) and row.rel_error <= row.tolerance
        row.speedup = row.undivided_ms / row.ucudnn_ms if row.ucudnn_ms > 0 else math.nan
        row.predicted_speedup = row.undivided_find_ms / row.predicted_ms if row.predicted_ms > 0 else math.nan
        row.ceiling_speedup = row.ceiling_ms / row.ucudnn_ms if row.ucudnn_ms > 0 else math.nan
