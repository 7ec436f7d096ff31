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

Timing, as a framework runs: each sample is ``calls_per_sample`` back-to-back calls issued without synchronising
between them (GPU calls are asynchronous; a framework issues its convolutions one after another), and its time is
the total divided by the number of calls. On a GPU the count adapts to the kernel unless given: enough calls for a
sample of ``sample_ms`` by cuDNN's Find time at N (2 to 10 calls), so that a long kernel is not run ten times per
sample when two already hide the host's latency. Every execution is warmed up, then sampled ``repeat`` times; the
median is reported. The undivided baseline and ucudnn are sampled alternately, so that both see the same background
load on a shared machine, and the speedup is the median of the pairs' ratios (``Row``). The host time spent issuing
each sample's calls (before any synchronisation) is reported per call as well: it is what each call costs the
framework's thread.

The preload library checks a new micro-batched plan on its first ``2 * (S + 1)`` executions, alternating with the
undivided choice (S = ``UCUDNN_VERIFY_SAMPLES``; ``2 * S`` more when its pairs of timings disagree), and then runs
the faster; a new plan of one call likewise against the runner-up single call its Find timed close to it. So
when a row's first call starts a check (the shim's ``verify_executions`` counter moves), ucudnn is warmed up
through the check until it is settled (its ``verified`` counter moves) before it is timed: the timed samples see
the settled choice, and the plan read back afterwards is the one that was kept. Whether the check replaced the
plan is recorded per row, and whether it was a runner-up's check.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ucudnn import bridge, config
from ucudnn.bench.backends import Backend, Sample
from ucudnn.bench.capi import Descriptors
from ucudnn.bench.problems import Problem
from ucudnn.cudnn import CudnnError, Op, Perf
from ucudnn.graph_api import ConvGraph, GraphApiError
from ucudnn.plan_text import algo_name, format_groups

ProgressFn = Callable[[int, int, str], None]


@dataclass
class Row:
    """One measured configuration. Times in ms, sizes in bytes. ``speedup`` is the median over the repeats of each
    pair's undivided / ucudnn time (the two samples of a pair taken back to back, under the same load), which a
    load that drifts between pairs does not move as it moves the quotient of the two medians, undivided_ms /
    ucudnn_ms (measured: 1.02x, 0.75x and 1.02x for three pairs of one call whose medians gave 0.76x)."""

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
    calls_per_sample: int = 0
    undivided_algo: str = ""
    undivided_workspace_bytes: int = 0
    undivided_ms: float = math.nan
    undivided_find_ms: float = math.nan
    ceiling_algo: str = ""
    ceiling_workspace_bytes: int = 0
    ceiling_ms: float = math.nan
    ucudnn_ms: float = math.nan
    ucudnn_times_ms: list[float] = field(default_factory=list)  # per call, one per sample
    undivided_times_ms: list[float] = field(default_factory=list)  # per call, one per sample, alternating with ucudnn's
    # Host wall time spent issuing one sample's calls (before any synchronisation) / calls, median over samples.
    undivided_host_us_per_call: float = math.nan
    ucudnn_host_us_per_call: float = math.nan
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
    verified: bool = False  # the preload library checked this row's plan on real executions during its warm-up
    rejected_by_measurement: bool = False  # ... and replaced it by the undivided choice, which is what was timed
    # The check was of a plan of one call against its runner-up (legacy path): replaced means by that runner-up.
    runner_up: bool = False
    # ucudnn ran cuDNN alone's own call: one micro-batch of N with the undivided algorithm, planned or passed
    # through (legacy path only; the graph path's side is a graph execution, never the baseline's legacy call).
    # Such a row's speedup measures the machine and a plan-cache hit, not a plan: the report counts it apart.
    own_call: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sample_speedups(self) -> list[float]:
        """Speedup of each repeat: undivided sample i / ucudnn sample i (sampled one after the other, so under
        the same background load); empty when the row was not timed."""
        pairs = zip(self.undivided_times_ms, self.ucudnn_times_ms, strict=False)
        return [u / c if c > 0 else math.nan for u, c in pairs]

    def paired_speedup(self) -> float:
        """The row's ``speedup``: the median of ``sample_speedups`` (NaN when none is finite)."""
        pairs = [x for x in self.sample_speedups() if math.isfinite(x)]
        return _median(pairs) if pairs else math.nan


DEFAULT_CALLS_PER_SAMPLE = {"cuda": 10, "host": 1}
MIN_PIPELINED_CALLS = 2  # a sample of one call between two events measures the host's latency, not the kernel
SAMPLE_MS = 2.0  # on a GPU, calls per sample adapt so that a sample lasts about this long


def default_calls_per_sample(backend: str) -> int:
    """Back-to-back calls per sample at most: 10 on a GPU (its calls are asynchronous), 1 on the host backend (its
    calls are synchronous, so more would measure the same thing, only slower)."""
    return DEFAULT_CALLS_PER_SAMPLE.get(backend, 1)


def adaptive_calls(kernel_ms: float, sample_ms: float, most: int) -> int:
    """Calls per sample for a kernel of ``kernel_ms``: enough for ``sample_ms``, between 2 and ``most``."""
    if not math.isfinite(kernel_ms) or kernel_ms <= 0:
        return most
    return max(min(MIN_PIPELINED_CALLS, most), min(most, math.ceil(sample_ms / kernel_ms)))


def verify_samples() -> int:
    """S = UCUDNN_VERIFY_SAMPLES as the preload library reads it: a new micro-batched plan's first 2 * (S + 1)
    executions alternate with the undivided choice (0: no check). Raises ConfigError for a bad value."""
    return int(config.get("UCUDNN_VERIFY_SAMPLES"))


def verify_calls(samples: int) -> int:
    """Executions the preload library spends checking a new micro-batched plan."""
    return 2 * (samples + 1) if samples > 0 else 0


@dataclass(frozen=True)
class RunConfig:
    ops: Sequence[str]
    limits: Sequence[int]
    policies: Sequence[str]
    repeat: int = 3
    warmup: int = 1  # untimed samples before timing
    tolerance: float | None = None  # None: the backend's default
    seed: int = 1234
    calls_per_sample: int | None = None  # None: default_calls_per_sample(backend), adapted per kernel on a GPU
    sample_ms: float = SAMPLE_MS  # the adapted samples' length
    verify_samples: int | None = None  # None: verify_samples(), read from the environment
    api: str = "legacy"  # how ucudnn is called: the legacy convolution API, or the graph (backend) API


@dataclass
class _Case:
    """Buffers and reference results of one problem x op, shared by every limit and policy."""

    problem: Problem
    op: Op
    d: Descriptors
    in0: Any
    in1: Any
    out: Any
    perfs: list[Perf]
    outputs: dict[int, Any] = field(default_factory=dict)  # reference output per undivided algo, on the device

    def drop(self) -> None:
        """Forget the buffers, so that the backend's ``release`` can free them."""
        self.in0 = self.in1 = self.out = None
        self.outputs.clear()


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else math.nan


def _calls_per_sample(cfg: RunConfig, backend: Backend) -> int:
    return cfg.calls_per_sample if cfg.calls_per_sample is not None else default_calls_per_sample(backend.name)


def _count(stats: dict[str, Any], key: str) -> int:
    """A counter of the preload library's stats; 0 when this build does not have it."""
    value = stats.get(key, 0)
    return int(value) if isinstance(value, int | float) else 0


def _base_row(p: Problem, op: str, limit: int, policy: str, backend: Backend, cfg: RunConfig, calls: int) -> Row:
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
        calls_per_sample=calls,
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


def own_call(row: Row, chosen_algo: int) -> bool:
    """Whether the ucudnn side of a legacy-path row ran cuDNN alone's call: its executed plan is one micro-batch
    of N with the undivided algorithm, or there was no plan (the calls passed through) and the framework took the
    undivided algorithm from ``Get*_v7``."""
    baseline = [(row.n, row.undivided_algo, 1)]
    if row.micro_batches:
        return [(int(m["batch"]), str(m["algo_name"]), int(m["count"])) for m in row.micro_batches] == baseline
    return row.passthrough_calls > 0 and algo_name(row.op, chosen_algo) == row.undivided_algo


def format_micro_batches(mbs: Sequence[dict[str, Any]]) -> str:
    """``4 x 8 GEMM + 1 x 2 IMPLICIT_GEMM``: micro-batch count x micro-batch size, then the algorithm (the notation
    of ``ucudnn db list`` and ``ucudnn plan``: :mod:`ucudnn.plan_text`)."""
    return format_groups((int(m["count"]), int(m["batch"]), str(m["algo_name"])) for m in mbs)


class Runner:
    def __init__(self, backend: Backend, cfg: RunConfig, progress: ProgressFn | None = None) -> None:
        self.b = backend
        self.cfg = cfg
        self.most_calls = self.calls = _calls_per_sample(cfg, backend)
        # On a GPU (asynchronous calls), unless given, calls per sample follow each kernel's time.
        self.adaptive = cfg.calls_per_sample is None and backend.name == "cuda"
        self.verify_calls = verify_calls(cfg.verify_samples if cfg.verify_samples is not None else verify_samples())
        if self.calls <= 0 or cfg.repeat <= 0 or cfg.warmup < 0:
            raise ValueError("calls_per_sample and repeat must be positive, warmup not negative")
        self.progress = progress or (lambda done, total, text: None)

    def run(self, problems: Sequence[Problem]) -> list[Row]:
        """Every row; ``self.rows`` holds those of the problems finished so far (what an interrupted run has)."""
        self.rows: list[Row] = []
        total = len(problems) * len(self.cfg.ops)
        done = 0
        for p in problems:
            for op in self.cfg.ops:
                self.progress(done, total, f"{p.label} {op}")
                self.rows += self._problem_op(p, op)
                done += 1
        self.progress(done, total, "done")
        return self.rows

    def _skipped(self, p: Problem, op: str, reason: str) -> list[Row]:
        out: list[Row] = []
        for limit in self.cfg.limits:
            for policy in self.cfg.policies:
                row = _base_row(p, op, limit, policy, self.b, self.cfg, self.calls)
                row.status, row.reason = "skipped", reason
                out.append(row)
        return out

    def _problem_op(self, p: Problem, op: str) -> list[Row]:
        try:
            case = self._prepare(p, Op.parse(op))
        except (CudnnError, MemoryError) as exc:
            self.b.release()
            return self._skipped(p, op, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # e.g. CuPy's OutOfMemoryError, whose type lives in CuPy
            self.b.release()
            if "memory" not in type(exc).__name__.lower():
                raise
            return self._skipped(p, op, f"{type(exc).__name__}: {exc}")
        try:
            return self._measure(case)
        finally:
            case.d.close()
            case.drop()
            self.b.release()  # this case's buffers, references and workspace

    def _prepare(self, p: Problem, op: Op) -> _Case:
        d = Descriptors.make(self.b.real, p)
        try:
            s0, s1, s2 = d.operand_shapes(op)
            in0 = self.b.random(s0, self.cfg.seed)
            in1 = self.b.random(s1, self.cfg.seed + 1)
            out = self.b.filled(s2, math.nan)
            perfs = self.b.real.find(self.b.handle, op, *d.args())
        except BaseException:
            d.close()
            raise
        return _Case(p, op, d, in0, in1, out, perfs)

    def _call(self, case: _Case, algo: int, workspace_bytes: int, *, hooked: bool) -> Callable[[], None]:
        """One call of ``algo`` on the cuDNN library itself (or through the preload library), arguments bound once.

        The workspace is the case's one buffer (grown if needed, then sliced): nothing is allocated per call.
        """
        b = self.b
        lib = b.hooked if hooked else b.real
        workspace = b.workspace(workspace_bytes)
        data = case.op.roles(b.ptr(case.in0), b.ptr(case.in1), b.ptr(case.out))
        return lib.executor(b.handle, case.op, *case.d.args(), algo, data, workspace, workspace_bytes)

    def _undivided_call(self, case: _Case, perf: Perf) -> Callable[[], None]:
        """``perf.algo`` on the cuDNN library itself, with a workspace of the size Find reported."""
        return self._call(case, perf.algo, perf.memory_bytes, hooked=False)

    def _reference(self, case: _Case, perf: Perf) -> None:
        """Run ``perf.algo`` once from a NaN-filled output and keep the result (once per algorithm)."""
        if perf.algo not in case.outputs:
            self.b.fill(case.out, math.nan)
            self.b.issue(self._undivided_call(case, perf), 1)
            case.outputs[perf.algo] = self.b.snapshot(case.out)

    def _samples(self, fn: Callable[[], None]) -> Sample:
        return self.b.sample(fn, self.calls)

    def _measure(self, case: _Case) -> list[Row]:
        p, op = case.problem, case.op.label
        ok = sorted((x for x in case.perfs if x.status == 0), key=lambda x: (x.time_ms, x.memory_bytes, x.algo))
        if not ok:
            statuses = ", ".join(f"{algo_name(op, x.algo)}={x.status}" for x in case.perfs) or "no results"
            return self._skipped(p, op, f"no algorithm succeeded at N={p.n} ({statuses})")
        ceiling = ok[0]
        if self.adaptive:
            self.calls = adaptive_calls(ceiling.time_ms, self.cfg.sample_ms, self.most_calls)
        try:
            # Every undivided algorithm used below fits in the ceiling's workspace (a faster one that fits a limit
            # would be the ceiling): one buffer of that size serves them all; only a larger ucudnn plan grows it.
            self.b.workspace(ceiling.memory_bytes)
            self._reference(case, ceiling)
            call = self._undivided_call(case, ceiling)
            self.b.issue(call, self.cfg.warmup * self.calls)
            ceiling_ms = _median([self._samples(call).ms_per_call for _ in range(self.cfg.repeat)])
        except CudnnError as exc:
            return self._skipped(p, op, f"undivided {algo_name(op, ceiling.algo)} failed: {exc}")
        rows: list[Row] = []
        for limit in self.cfg.limits:
            fits = [x for x in ok if x.memory_bytes <= limit]
            for policy in self.cfg.policies:
                row = _base_row(p, op, limit, policy, self.b, self.cfg, self.calls)
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
                    if self.cfg.api == "graph":
                        self._run_ucudnn_graph(case, base, ceiling, row)
                    else:
                        self._run_ucudnn(case, base, row)
                except (CudnnError, GraphApiError) as exc:
                    row.status, row.reason = "skipped", str(exc)
                if row.status == "ok":
                    self._compare(case, base, row)
                rows.append(row)
        return rows

    def _time_pair(
        self, case: _Case, undivided_call: Callable[[], None], ucudnn_call: Callable[[], None], row: Row
    ) -> None:
        """Sample the undivided baseline and ucudnn alternately (both under the same background load on a shared
        machine) and record their medians. Both sides are treated alike: each sample starts from a NaN-filled
        output, and which side goes first alternates from pair to pair (the second of two samples of the same call
        measured ~0.25% slower on the host backend: with a fixed order that reads as ucudnn being slower). The
        output ``_compare`` reads is ucudnn's, from its last sample or one more call after it."""
        undivided: list[Sample] = []
        ucudnn: list[Sample] = []
        sides = ((undivided_call, undivided), (ucudnn_call, ucudnn))
        for i in range(self.cfg.repeat):
            for call, samples in sides if i % 2 == 0 else sides[::-1]:
                self.b.fill(case.out, math.nan)
                samples.append(self._samples(call))
        if self.cfg.repeat % 2 == 0:  # the last sample was the baseline's
            self.b.fill(case.out, math.nan)
            self.b.issue(ucudnn_call, 1)
        row.undivided_times_ms = [s.ms_per_call for s in undivided]
        row.undivided_ms = _median(row.undivided_times_ms)
        row.undivided_host_us_per_call = _median([s.host_us_per_call for s in undivided])
        row.ucudnn_times_ms = [s.ms_per_call for s in ucudnn]
        row.ucudnn_ms = _median(row.ucudnn_times_ms)
        row.ucudnn_host_us_per_call = _median([s.host_us_per_call for s in ucudnn])

    def _run_ucudnn(self, case: _Case, base: Perf, row: Row) -> None:
        """Plan through the preload library, then time it interleaved with the undivided baseline.

        Interleaving (undivided, ucudnn, undivided, ucudnn, ...) keeps both medians under the same background
        load on a shared machine; the last sample is ucudnn's, so its output is what ``_compare`` reads.
        """
        b, op = self.b, case.op
        bridge.clear_plans()  # planning is then timed from the SQLite cache or the benchmark, never memory
        bridge.set_option("UCUDNN_BATCH_SIZE_POLICY", row.policy)
        bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", str(row.limit_bytes))
        # PyTorch's legacy path: Get*_v7 (ucudnn plans here and reports its plan first), then the workspace
        # query for that algorithm. Find through ucudnn would also run the real Find at N, which is not planning.
        t0 = time.perf_counter()
        perfs = b.hooked.get_v7(b.handle, op, *case.d.args())
        row.planning_ms = (time.perf_counter() - t0) * 1e3
        # A framework under a memory limit takes the first result whose workspace it can afford. When ucudnn
        # plans, that is entry 0 (its plan fits by construction); when the call passes through, it is cuDNN's
        # best fitting algorithm -- never one over the limit, which would flatter ucudnn.
        chosen = next((x for x in perfs if x.status == 0 and x.memory_bytes <= row.limit_bytes), None)
        if chosen is None:
            raise CudnnError.failed(
                "ucudnn Get_v7", -1, "no successful result within the limit through the preload library"
            )
        workspace_bytes = b.hooked.workspace_size(b.handle, op, *case.d.args(), chosen.algo)
        if workspace_bytes > row.limit_bytes:
            why = f"{workspace_bytes} B for algo {chosen.algo} exceeds the limit {row.limit_bytes} B"
            raise CudnnError.failed("ucudnn Get*WorkspaceSize", -1, why)
        plan = bridge.last_plan()
        before = bridge.stats()
        b.workspace(max(workspace_bytes, base.memory_bytes))  # grow the case's buffer first: both calls slice it
        ucudnn_call = self._call(case, chosen.algo, workspace_bytes, hooked=True)
        undivided_call = self._undivided_call(case, base)
        warm = self.cfg.warmup * self.calls
        b.issue(undivided_call, warm)
        b.fill(case.out, math.nan)
        # A new micro-batched plan is checked on its first executions; the timed samples must see the settled
        # choice. A check starts with the first execution of the row's decision (the plan cache was cleared above),
        # so when that one was not a check's (the shim's counter says so), there is none to wait for.
        b.issue(ucudnn_call, 1)
        checking = self.verify_calls > 0 and (
            "verify_executions" not in before
            or _count(bridge.stats(), "verify_executions") > _count(before, "verify_executions")
        )
        if checking:
            b.issue(ucudnn_call, max(warm, self.verify_calls) - 1)
            # On a GPU the check reads its events one call late (never synchronising): after the synchronisation
            # in ``issue``, one more call settles it.
            b.issue(ucudnn_call, 1)
            self._settle_check(ucudnn_call, before, "verified")
        else:
            b.issue(ucudnn_call, max(warm - 1, 0))
        self._time_pair(case, undivided_call, ucudnn_call, row)
        executed = bridge.last_plan() or plan
        after = bridge.stats()
        row.passthrough_calls = _count(after, "passthrough") - _count(before, "passthrough")
        row.verified = _count(after, "verified") > _count(before, "verified")
        row.rejected_by_measurement = _count(after, "rejected_by_measurement") > _count(
            before, "rejected_by_measurement"
        )
        row.runner_up = _count(after, "runner_up_checks") > _count(before, "runner_up_checks")
        # No plan ran (every call passed through): there is no prediction to compare with.
        row.predicted_ms = float(executed["time_ms"]) if "time_ms" in executed else math.nan
        row.plan_workspace_bytes = int(executed.get("workspace_bytes", workspace_bytes))
        row.micro_batches = _micro_batches(executed, op.label)
        row.own_call = own_call(row, chosen.algo)
        if row.passthrough_calls:
            row.reason = f"{row.passthrough_calls} call(s) passed through unplanned"

    def _settle_check(self, call: Callable[[], None], before: dict[str, Any], counter: str) -> None:
        """A check whose first pairs of timings disagree takes S more pairs (2 S calls): run them, so that the timed
        samples see the settled choice, not the check's alternation. Stops as soon as the check's counter moves."""
        for _ in range(self.verify_calls):
            if _count(bridge.stats(), counter) > _count(before, counter):
                return
            self.b.issue(call, 1)

    def _run_ucudnn_graph(self, case: _Case, base: Perf, ceiling: Perf, row: Row) -> None:
        """The graph-API path: plan the fastest engine as a framework would, let the preload library answer its
        workspace (its own plan within the limit: engines benchmarked at each size, the DP), and time that
        against the undivided baseline like ``_run_ucudnn``.

        The host backend's engines are its legacy algorithms (engine i is algorithm i), so the fastest engine is
        the ceiling's algorithm. If the shim cannot take it over within the limit, it reports the real workspace
        and a framework under that limit moves on to an engine that fits: the baseline's.
        """
        b, op, p, d = self.b, case.op, case.problem, case.d
        bridge.clear_plans()
        bridge.set_option("UCUDNN_BATCH_SIZE_POLICY", row.policy)
        bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", str(row.limit_bytes))
        pad, stride = (p.pad_h, p.pad_w), (p.stride_h, p.stride_w)

        def plan(engine: int) -> ConvGraph:
            handle = b.handle.ptr or 0
            return ConvGraph(b.graph, handle, op.label, d.x_shape, d.w_shape, d.y_shape, pad, stride, engine)

        t0 = time.perf_counter()
        graph = plan(ceiling.algo)
        if graph.workspace_bytes > row.limit_bytes:
            graph.close()
            graph = plan(base.algo)
        row.planning_ms = (time.perf_counter() - t0) * 1e3
        try:
            before = bridge.stats()
            workspace_bytes = graph.workspace_bytes
            b.workspace(max(workspace_bytes, base.memory_bytes))
            workspace = b.workspace(workspace_bytes)
            x, w, y = op.roles(b.ptr(case.in0), b.ptr(case.in1), b.ptr(case.out))
            ucudnn_call = graph.executor(x, w, y, workspace)
            undivided_call = self._undivided_call(case, base)
            warm = self.cfg.warmup * self.calls
            b.issue(undivided_call, warm)
            b.fill(case.out, math.nan)
            # Through the shim's check of its split against the undivided engine that fits (when it has both),
            # plus one call, as on the legacy path: on a GPU the check reads its events one call late.
            b.issue(ucudnn_call, max(warm, self.verify_calls, 1))
            b.issue(ucudnn_call, 1)
            if self.verify_calls:
                self._settle_check(ucudnn_call, before, "graph_verified")
            self._time_pair(case, undivided_call, ucudnn_call, row)
            after = bridge.stats()
            resolved = bridge.graph_plan(graph.plan)
        finally:
            graph.close()
        row.passthrough_calls = _count(after, "passthrough") - _count(before, "passthrough")
        row.predicted_ms = math.nan  # the graph path does not report its plan's predicted time
        row.plan_workspace_bytes = workspace_bytes
        runs = resolved.get("runs")
        parts = resolved.get("alternative" if runs == "alternative" else "parts") or []
        if runs == "caller" or not parts:
            engine = int(resolved.get("engine", -1))
            parts = [{"batch": p.n, "engine": engine, "count": 1}]
        row.micro_batches = [
            {"batch": int(x["batch"]), "algo": int(x["engine"]), "count": int(x["count"]),
             "algo_name": algo_name(op.label, int(x["engine"])) if int(x["engine"]) >= 0 else "?"}
            for x in parts
        ]  # fmt: skip
        row.verified = after.get("graph_verified", 0) > before.get("graph_verified", 0)
        row.rejected_by_measurement = after.get("graph_rejected_by_measurement", 0) > before.get(
            "graph_rejected_by_measurement", 0
        )
        row.runner_up = after.get("graph_runner_up_checks", 0) > before.get("graph_runner_up_checks", 0)
        if not resolved.get("convolution"):
            row.reason = f"the shim did not take the graph: {resolved.get('why_not')}"

    def _compare(self, case: _Case, base: Perf, row: Row) -> None:
        # On the backend's device; only the two maxima come back.
        row.max_abs_error, scale = self.b.compare(case.out, case.outputs[base.algo])
        row.rel_error = row.max_abs_error / scale if scale > 0 else row.max_abs_error
        # NaN anywhere (a skipped micro-batch leaves the NaN fill) makes the error infinite and the comparison false.
        row.output_match = math.isfinite(row.rel_error) and row.rel_error <= row.tolerance
        row.speedup = row.paired_speedup()
        row.predicted_speedup = row.undivided_find_ms / row.predicted_ms if row.predicted_ms > 0 else math.nan
        row.ceiling_speedup = row.ceiling_ms / row.ucudnn_ms if row.ucudnn_ms > 0 else math.nan
