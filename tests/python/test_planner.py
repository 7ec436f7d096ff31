"""The planner with recorded benchmark tables: what it benchmarks, what it caches, what it returns."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from ucudnn.cache import Cache, PlanKey, Unallocated, Verdict
from ucudnn.optimizer import AlgoPerf, Status, keeps_quantum
from ucudnn.planner import MAX_MICRO_BATCHES, NetworkKernel, Planner
from ucudnn.policy import KernelOverride, WorkspacePolicy

KEY = "fwd|float|x=?x64x28x28|w=128x64x3x3|pad=1,1|str=1,1|dil=1,1|g=1"
BACKEND = "host|cudnn-host 9.0|cpu"
KiB, MiB = 1024, 1024**2


def table(b: int) -> list[AlgoPerf]:
    """A recorded table with the μ-cuDNN trade-off: algo 0 needs nothing and is slow; algo 1 is fast but its
    workspace grows with b (1 MiB per sample); algo 2 is fastest, non-deterministic, 2 MiB per sample; algo 5
    could not run; algo 9 is outside the op's range."""
    return [
        AlgoPerf(b, 0, 1.0 * b, 0),
        AlgoPerf(b, 1, 0.3 * b + 0.05, MiB * b),
        AlgoPerf(b, 2, 0.2 * b + 0.05, 2 * MiB * b, deterministic=False),
        AlgoPerf(b, 5, math.inf, 0),
        AlgoPerf(b, 9, 0.001, 0),
    ]


class Recorded:
    """A benchmark that answers from `table` and records which sizes it was asked for."""

    def __init__(self, fail: Sequence[int] = (), empty: Sequence[int] = ()) -> None:
        self.calls: list[int] = []
        self.fail, self.empty = set(fail), set(empty)

    def __call__(self, b: int) -> list[AlgoPerf]:
        self.calls.append(b)
        if b in self.fail:
            raise RuntimeError(f"CUDNN_STATUS_ALLOC_FAILED at b={b}")
        return [] if b in self.empty else table(b)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("UCUDNN_DETERMINISTIC", "UCUDNN_TIME_SLACK", "UCUDNN_BATCH_SIZE_POLICY"):
        monkeypatch.delenv(name, raising=False)


def plan(planner: Planner, bench: Recorded, **kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "key": KEY,
        "backend_id": BACKEND,
        "batch": 16,
        "workspace_limit_bytes": 4 * MiB,
        "policy": "powerOfTwo",
        "deterministic_only": False,
        "algo_count": 8,
        "benchmark": bench,
    }
    args.update(kw)
    return planner.plan(**args)


def steps(result) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return [(mb.batch, mb.algo) for mb in result.plan.micro_batches]


def test_benchmarks_largest_first_then_hits_the_cache(tmp_path: Path) -> None:
    planner, bench = Planner(Cache(tmp_path / "c.sqlite")), Recorded()
    first = plan(planner, bench)
    assert first.status is Status.OPTIMAL
    assert bench.calls == [16, 8, 4, 2, 1]
    # Under 4 MiB algo 2 fits up to b=2 and algo 1 up to b=4; eight micro-batches of 2 with algo 2 are fastest,
    # far ahead of one undivided call with the only algorithm that fits at b=16 (16 ms).
    assert steps(first) == [(2, 2)] * 8
    assert first.plan.time_ms == pytest.approx(8 * (0.2 * 2 + 0.05))
    assert first.plan.workspace_bytes == 4 * MiB
    # A new planner on the same file (another process, a restart) gets the stored plan without benchmarking.
    again = plan(Planner(Cache(tmp_path / "c.sqlite")), bench)
    assert bench.calls == [16, 8, 4, 2, 1]
    assert again.plan == first.plan and again.message == "cached plan"


def test_in_memory_planner_benchmarks_once() -> None:
    planner, bench = Planner(), Recorded()
    assert plan(planner, bench).plan == plan(planner, bench).plan
    assert bench.calls == [16, 8, 4, 2, 1]


def test_rows_measured_under_a_small_limit_serve_a_larger_one() -> None:
    planner, bench = Planner(), Recorded()
    small = plan(planner, bench, workspace_limit_bytes=0)
    assert steps(small) == [(16, 0)]
    large = plan(planner, bench, workspace_limit_bytes=64 * MiB)
    assert bench.calls == [16, 8, 4, 2, 1]  # nothing measured again, yet the hungry algorithm is used
    assert steps(large) == [(16, 2)]


def test_rows_measured_under_a_large_limit_serve_a_smaller_one() -> None:
    planner, bench = Planner(), Recorded()
    assert steps(plan(planner, bench, workspace_limit_bytes=64 * MiB)) == [(16, 2)]
    small = plan(planner, bench, workspace_limit_bytes=2 * MiB)
    assert bench.calls == [16, 8, 4, 2, 1]
    assert small.plan.workspace_bytes <= 2 * MiB
    assert steps(small) == [(1, 2)] * 16


def test_a_plan_never_has_more_micro_batches_than_the_shim_holds() -> None:
    """At N = 65536 under 32 MiB, 65536 calls of one sample with algo 2 would be fastest by the table; a plan holds
    at most MAX_MICRO_BATCHES (4096) of them, so sizes below 16 are not even measured (the shim refused such a
    plan, and the call ran undivided: an extreme-size fuzz case found it)."""
    planner, bench = Planner(), Recorded()
    result = plan(planner, bench, batch=65536, workspace_limit_bytes=32 * MiB)
    assert min(bench.calls) == 65536 // MAX_MICRO_BATCHES == 16
    assert steps(result) == [(16, 2)] * MAX_MICRO_BATCHES
    kernel = NetworkKernel(KEY, 65536, 8, bench)
    front = planner.kernel_front(kernel, backend_id=BACKEND, workspace_limit_bytes=32 * MiB, policy="powerOfTwo")
    assert front and all(len(p.micro_batches) <= MAX_MICRO_BATCHES for p in front)
    assert min(bench.calls) == 16


def test_an_alignment_quantum_keeps_every_part_but_one_a_multiple_of_it(tmp_path: Path) -> None:
    """N = 11 under 4 MiB, "all": five parts of 2 and one of 1 with algo 2 (2 MiB a sample) are fastest, but with a
    quantum of 4 (a graph whose tensors' declared alignment holds only every 4 samples) every part but one must be a
    multiple of 4: 4 + 4 + 3 with algo 1. A plan stored without the quantum is not served to a request with it: it
    is planned afresh, and stored."""
    cache = Cache(tmp_path / "c.sqlite")
    planner, bench = Planner(cache=cache), Recorded()
    plain = plan(planner, bench, batch=11, policy="all")
    assert steps(plain) == [(2, 2)] * 5 + [(1, 2)]
    quantized = plan(planner, bench, batch=11, policy="all", align_quantum=4)
    assert steps(quantized) == [(4, 1), (4, 1), (3, 1)] and "cached" not in quantized.message
    again = plan(Planner(cache=cache), Recorded(), batch=11, policy="all", align_quantum=4)
    assert again.message == "cached plan" and steps(again) == [(4, 1), (4, 1), (3, 1)]
    with pytest.raises(ValueError, match="align_quantum"):
        plan(planner, bench, batch=11, align_quantum=0)


def test_micro_batch_sizes_are_shared_across_mini_batch_sizes() -> None:
    planner, bench = Planner(), Recorded()
    plan(planner, bench, batch=16)
    plan(planner, bench, batch=8)
    assert bench.calls == [16, 8, 4, 2, 1]  # N=8 needs 8, 4, 2, 1: all measured for N=16
    plan(planner, bench, batch=12)
    assert bench.calls == [16, 8, 4, 2, 1, 12]


def test_deterministic_only_never_uses_a_non_deterministic_algorithm() -> None:
    planner, bench = Planner(), Recorded()
    free = plan(planner, bench, workspace_limit_bytes=64 * MiB)
    det = plan(planner, bench, workspace_limit_bytes=64 * MiB, deterministic_only=True)
    assert not free.plan.deterministic and det.plan.deterministic
    assert steps(det) == [(16, 1)]
    assert bench.calls == [16, 8, 4, 2, 1]


def test_algorithms_outside_the_op_range_are_dropped() -> None:
    # Algo 9 (0.001 ms) would win if it were allowed.
    result = plan(Planner(), Recorded(), algo_count=3, workspace_limit_bytes=0)
    assert steps(result) == [(16, 0)]
    assert steps(plan(Planner(), Recorded(), algo_count=10, workspace_limit_bytes=0)) == [(16, 9)]


def test_infeasible_when_nothing_fits_and_nothing_is_stored() -> None:
    planner = Planner()

    def only_hungry(b: int) -> list[AlgoPerf]:
        return [AlgoPerf(b, 1, 0.3 * b, MiB * b)]

    result = plan(planner, Recorded(), benchmark=only_hungry, workspace_limit_bytes=KiB)
    assert result.status is Status.INFEASIBLE and result.plan is None and result.message
    assert planner.cache.stats()["plans"] == 0


def test_a_failing_size_is_skipped_not_fatal_and_retried_later(capsys: pytest.CaptureFixture[str]) -> None:
    planner, bench = Planner(), Recorded(fail=[4], empty=[8])
    result = plan(planner, bench, deterministic_only=True)
    assert result.status is Status.OPTIMAL
    assert steps(result) == [(2, 1)] * 8  # with size 4 measured this would be four micro-batches of 4
    assert "sizes not benchmarked: 4, 8" in result.message
    assert "CUDNN_STATUS_ALLOC_FAILED" in capsys.readouterr().err
    # The plan made without sizes 4 and 8 is not stored, so the next request measures them again.
    assert planner.cache.stats()["plans"] == 0
    bench.fail.clear()
    bench.empty.clear()
    assert steps(plan(planner, bench, deterministic_only=True)) == [(4, 1)] * 4
    assert bench.calls == [16, 8, 4, 2, 1, 8, 4]


class ShortOfMemory(Recorded):
    """`table`, except that at the sizes in `short` the search could not give algorithms 1 and 2 their workspace."""

    def __init__(self, short: Sequence[int]) -> None:
        super().__init__()
        self.short = set(short)

    def __call__(self, b: int) -> list[AlgoPerf]:
        rows = super().__call__(b)
        if b in self.short:
            return [Unallocated(b, p.algo, math.inf, p.workspace_bytes) if p.algo in (1, 2) else p for p in rows]
        return rows


def test_a_run_short_of_memory_serves_only_the_limits_it_covers(tmp_path: Path) -> None:
    # At b = 8 algorithms 1 and 2 need 8 and 16 MiB: beyond a 4 MiB limit, so that run is complete for it; the plan
    # is the one a full measurement gives (eight micro-batches of 2) and is stored.
    path = tmp_path / "c.sqlite"
    planner, bench = Planner(Cache(path)), ShortOfMemory([8])
    assert steps(plan(planner, bench)) == [(2, 2)] * 8
    assert planner.cache.stats()["plans"] == 1
    stored = planner.cache.get_benchmark(KEY, BACKEND, 8, include_failed=True)
    assert stored is not None and sorted(p.algo for p in stored if math.isfinite(p.time_ms)) == [0, 9]
    # Under 64 MiB they would fit: the run says nothing of them, so the next process measures b = 8 again, with
    # memory free now.
    bench.short.clear()
    large = plan(Planner(Cache(path)), bench, workspace_limit_bytes=64 * MiB)
    assert bench.calls == [16, 8, 4, 2, 1, 8]
    assert steps(large) == steps(plan(Planner(), Recorded(), workspace_limit_bytes=64 * MiB))


def test_a_size_short_of_memory_is_measured_once_per_process(tmp_path: Path) -> None:
    # The memory stays short (a framework holds it for the whole run): requests under larger limits in the same
    # process take the run measured short, and their plans are not stored; the next process measures it again.
    path = tmp_path / "c.sqlite"
    planner, bench = Planner(Cache(path)), ShortOfMemory([16])
    for limit in (64 * MiB, 128 * MiB):
        result = plan(planner, bench, workspace_limit_bytes=limit)
        assert "without memory for every algorithm: 16" in result.message
    assert bench.calls == [16, 8, 4, 2, 1] and planner.cache.stats()["plans"] == 0
    later = ShortOfMemory([])
    plan(Planner(Cache(path)), later, workspace_limit_bytes=64 * MiB)
    assert later.calls == [16]


def test_a_run_not_timed_only_over_the_limit_is_timed_in_the_process_when_a_limit_fits() -> None:
    """The graph benchmark does not time engines over the request's limit (their rows: unallocated, with their
    workspace). That run is complete for the limit and plans as a full one does; a later request of the same
    process under a limit they fit measures the size again, where a run truly short of memory is taken as it is."""
    planner, bench = Planner(), ShortOfMemory([8])  # at b = 8 algorithms 1 and 2 need 8 and 16 MiB: over 4 MiB
    assert steps(plan(planner, bench)) == steps(plan(Planner(), Recorded()))
    bench.short.clear()
    large = plan(planner, bench, workspace_limit_bytes=64 * MiB)
    assert bench.calls == [16, 8, 4, 2, 1, 8]
    assert steps(large) == steps(plan(Planner(), Recorded(), workspace_limit_bytes=64 * MiB))
    assert "without memory" not in large.message


def test_a_plan_from_a_run_short_of_memory_is_not_kept(tmp_path: Path) -> None:
    # Within 64 MiB, b = 16 could run algorithm 2 (32 MiB) had the search had the memory: the plan made without it
    # is used, not stored, and the next process measures b = 16 again.
    path = tmp_path / "c.sqlite"
    planner, bench = Planner(Cache(path)), ShortOfMemory([16])
    result = plan(planner, bench, workspace_limit_bytes=64 * MiB)
    assert result.status is Status.OPTIMAL and "without memory for every algorithm: 16" in result.message
    assert planner.cache.stats()["plans"] == 0
    bench.short.clear()
    next_process = Planner(Cache(path))
    again = plan(next_process, bench, workspace_limit_bytes=64 * MiB)
    assert bench.calls == [16, 8, 4, 2, 1, 16] and "without memory" not in again.message
    assert next_process.cache.stats()["plans"] == 1


def test_a_bad_stored_plan_is_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.sqlite"
    planner, bench = Planner(Cache(path)), Recorded()
    good = plan(planner, bench)
    raw = sqlite3.connect(path)
    raw.execute("UPDATE plans SET plan_json = '[[16, 0, 0], [16, 0, 0]]'")  # 32 samples for N=16
    raw.commit()
    raw.close()
    again = plan(planner, bench)
    assert again.plan == good.plan and again.message != "cached plan"
    assert "ignoring a bad cached plan" in capsys.readouterr().err
    assert plan(planner, bench).message == "cached plan"
    assert bench.calls == [16, 8, 4, 2, 1]


def test_a_stored_plan_with_an_algorithm_out_of_range_is_not_used() -> None:
    planner, bench = Planner(), Recorded()
    plan(planner, bench, algo_count=10, workspace_limit_bytes=0)  # stores [(16, 9)]
    assert steps(plan(planner, bench, algo_count=3, workspace_limit_bytes=0)) == [(16, 0)]


def test_policy_determinism_and_overrides() -> None:
    pol = WorkspacePolicy(deterministic_only=True, overrides=(KernelOverride(2 * MiB, key_contains="w=128x64"),))
    planner = Planner(policy=pol)
    result = plan(planner, Recorded(), workspace_limit_bytes=64 * MiB)
    assert result.plan.deterministic and result.plan.workspace_bytes <= 2 * MiB
    assert planner.cache.get_plan(PlanKey(KEY, BACKEND, 16, "powerOfTwo", 2 * MiB, True)) == result.plan
    # An override cannot raise a call's limit above what the caller offers.
    up = Planner(policy=WorkspacePolicy(overrides=(KernelOverride(64 * MiB, op="forward"),)))
    assert plan(up, Recorded(), workspace_limit_bytes=0, op=0).plan.workspace_bytes == 0


def test_time_slack_prefers_less_workspace_and_is_not_stored() -> None:
    saver = Planner(policy=WorkspacePolicy(time_slack=0.25))
    fastest = plan(Planner(), Recorded(), workspace_limit_bytes=64 * MiB)
    chosen = plan(saver, Recorded(), workspace_limit_bytes=64 * MiB)
    assert chosen.plan.time_ms <= 1.25 * fastest.plan.time_ms
    assert chosen.plan.workspace_bytes < fastest.plan.workspace_bytes
    assert saver.cache.stats()["plans"] == 0


def test_time_slack_keeps_an_alignment_quantum() -> None:
    """The slack's Pareto front holds only plans that keep the request's quantum (N = 11, "all", 4 MiB: the
    fastest such plan is 4 + 4 + 3 with algo 1; the fastest of all, 5 x 2 + 1 with algo 2, breaks it)."""
    saver = Planner(policy=WorkspacePolicy(time_slack=0.25))
    strict = plan(Planner(), Recorded(), batch=11, policy="all", align_quantum=4)
    chosen = plan(saver, Recorded(), batch=11, policy="all", align_quantum=4)
    assert keeps_quantum(chosen.plan, 4), chosen.plan
    assert chosen.plan.time_ms <= 1.25 * strict.plan.time_ms
    assert chosen.plan.workspace_bytes <= strict.plan.workspace_bytes and "within 25%" in chosen.message


def test_environment_policy_is_read_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UCUDNN_DETERMINISTIC", "1")
    assert plan(Planner(), Recorded(), workspace_limit_bytes=64 * MiB).plan.deterministic


def test_an_unlimited_workspace_from_c_is_stored(tmp_path: Path) -> None:
    planner, bench = Planner(Cache(tmp_path / "c.sqlite")), Recorded()
    size_max = 2**64 - 1
    assert steps(plan(planner, bench, workspace_limit_bytes=size_max)) == [(16, 2)]
    assert plan(planner, bench, workspace_limit_bytes=size_max).message == "cached plan"


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="batch"):
        plan(Planner(), Recorded(), batch=0)
    with pytest.raises(ValueError, match="batch-size policy"):
        plan(Planner(), Recorded(), policy="fibonacci")
    with pytest.raises(ValueError, match="algo_count"):
        plan(Planner(), Recorded(), algo_count=0)


def test_plan_network_divides_one_budget() -> None:
    b1, b2 = Recorded(), Recorded()
    kernels = [NetworkKernel(KEY, 16, 8, b1), NetworkKernel(KEY.replace("128x64", "64x64"), 8, 8, b2)]
    planner = Planner(policy=WorkspacePolicy(deterministic_only=True))
    result = planner.plan_network(kernels, backend_id=BACKEND, total_workspace_bytes=8 * MiB, policy="powerOfTwo")
    assert result.status is Status.OPTIMAL and result.plans is not None
    plans = [p for p in result.plans if p is not None]
    assert len(plans) == len(result.plans) == 2  # a plan for each kernel
    assert [p.batch for p in plans] == [16, 8]
    assert sum(p.workspace_bytes for p in plans) <= 8 * MiB
    assert all(p.deterministic for p in plans)
    # The division is never worse than splitting the budget evenly (4 MiB each, Workspace Reuse), and here
    # giving either kernel more than half would cost the other more than it saves.
    even = sum(
        plan(planner, Recorded(), key=k.key, batch=k.batch, workspace_limit_bytes=4 * MiB).plan.time_ms for k in kernels
    )
    assert result.total_time_ms == pytest.approx(even) == pytest.approx(4 * 1.25 + 2 * 1.25)
    skewed = planner.plan_network(kernels, backend_id=BACKEND, total_workspace_bytes=5 * MiB, policy="powerOfTwo")
    assert skewed.total_workspace_bytes <= 5 * MiB and skewed.total_time_ms > result.total_time_ms
    assert b1.calls == [16, 8, 4, 2, 1] and b2.calls == [8, 4, 2, 1]
    again = planner.plan_network(kernels, backend_id=BACKEND, total_workspace_bytes=8 * MiB, policy="powerOfTwo")
    assert again.plans == result.plans and b1.calls == [16, 8, 4, 2, 1]


def test_every_micro_batch_costs_at_least_one_call(tmp_path: Path) -> None:
    # With a host cost of 1 ms per call, eight calls of 0.45 ms (algo 2 at b=2) cost 8 ms: four micro-batches of
    # 4 with algo 1 (1.25 ms each) become the fastest plan.
    path = tmp_path / "c.sqlite"
    measured: list[float] = []

    def cost() -> float:
        measured.append(1.0)
        return 1.0

    result = plan(Planner(Cache(path)), Recorded(), call_cost=cost)
    assert measured == [1.0]
    assert steps(result) == [(4, 1)] * 4
    assert result.plan.time_ms == pytest.approx(4 * 1.25)
    # Measured once per device: another planner on the same cache (a later run) reads it instead.
    other = Planner(Cache(path))

    def again() -> float:
        raise AssertionError("the call cost was measured twice")

    assert plan(other, Recorded(), call_cost=again, workspace_limit_bytes=3 * MiB).plan is not None
    assert other.call_cost_ms(BACKEND) == 1.0
    # A measurement that fails charges nothing (and says so), it does not fail the plan.
    broken = Planner(Cache.in_memory())

    def fails() -> float:
        raise RuntimeError("no handle")

    assert steps(plan(broken, Recorded(), call_cost=fails)) == [(2, 2)] * 8


def test_a_stored_verdict_settles_the_plan(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = Cache(path)
    planner, bench = Planner(cache), Recorded()
    first = plan(planner, bench)
    assert steps(first) == [(2, 2)] * 8 and not first.verified
    pk = PlanKey(KEY, BACKEND, 16, "powerOfTwo", 4 * MiB, False)
    checked = tuple((mb.batch, mb.algo, mb.math_type) for mb in first.plan.micro_batches)
    # Lost to the undivided choice on real executions: the planner answers that choice, marked verified.
    cache.put_verdict(Verdict(pk, checked, ((16, 0, 0),), False, 9.0, 8.0, 3))
    replaced = plan(planner, bench)
    assert replaced.verified and steps(replaced) == [(16, 0)] and replaced.plan.time_ms == pytest.approx(16.0)
    # Won: the same plan, marked verified.
    cache.put_verdict(Verdict(pk, checked, ((16, 0, 0),), True, 3.0, 16.0, 3))
    kept = plan(planner, bench)
    assert kept.verified and kept.plan == first.plan
    # A verdict is about one workspace: under another limit the plan is checked again.
    assert not plan(planner, bench, workspace_limit_bytes=4 * MiB + 1).verified
    # A malformed row is ignored (with a warning), never trusted.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE verdicts SET undivided_json = '[[16, 0]]'")
    conn.close()
    assert not plan(planner, bench).verified


@pytest.mark.parametrize("kept", [True, False])
def test_a_verdict_against_another_undivided_choice_is_not_trusted(tmp_path: Path, kept: bool) -> None:
    """A check's verdict holds against the undivided choice it timed, and only while that is still the fastest
    single call within the limit. Was: trusted whatever is faster now -- a plan kept against a weaker algorithm
    ran without a check where a faster undivided one fits, and a lost check answered that weaker algorithm."""
    cache = Cache(tmp_path / "c.sqlite")
    planner, bench = Planner(cache), Recorded()
    first = plan(planner, bench)
    pk = PlanKey(KEY, BACKEND, 16, "powerOfTwo", 4 * MiB, False)
    checked = tuple((mb.batch, mb.algo, mb.math_type) for mb in first.plan.micro_batches)
    cache.put_verdict(Verdict(pk, checked, ((16, 0, 0),), kept, 3.0, 16.0, 3))
    assert plan(planner, bench).verified  # against algo 0, the undivided choice within 4 MiB
    # N measured again: algo 3 now runs undivided in 2 ms within 4 MiB, which the verdict never timed.
    cache.put_benchmark(KEY, BACKEND, 16, [*table(16), AlgoPerf(16, 3, 2.0, 4 * MiB)])
    again = plan(planner, bench)
    assert not again.verified, again
    assert steps(again) == steps(first)  # the stored plan, to be checked against algo 3 on real executions


@pytest.mark.parametrize(("call_ms", "gain"), [(2.76, 0.01), (2.6, 0.05)])
def test_a_batch_is_divided_only_for_more_than_the_checks_margin(
    monkeypatch: pytest.MonkeyPatch, call_ms: float, gain: float
) -> None:
    """Within 4 MiB the undivided choice is algo 0 (16 ms at N=16); algo 1 in four micro-batches of 4 is predicted
    ``gain`` faster. A check on real executions keeps a divided plan only if it is measured at least
    UCUDNN_VERIFY_MARGIN (2%) faster, so the planner divides only for a predicted gain above that margin; with
    the margin at 0 it divides for any gain."""

    def bench(b: int) -> list[AlgoPerf]:
        return [AlgoPerf(b, 0, 1.0 * b, 0), AlgoPerf(b, 1, 0.3 * b + call_ms, MiB * b)]

    monkeypatch.setenv("UCUDNN_VERIFY_MARGIN", "0.02")
    result = plan(Planner(), Recorded(), benchmark=bench)
    assert result.plan.time_ms == pytest.approx(16.0 if gain < 0.02 else 16.0 * (1 - gain))
    if gain < 0.02:
        assert steps(result) == [(16, 0)] and "under UCUDNN_VERIFY_MARGIN (2%)" in result.message, result.message
    else:
        assert steps(result) == [(4, 1)] * 4
    monkeypatch.setenv("UCUDNN_VERIFY_MARGIN", "0")
    assert steps(plan(Planner(), Recorded(), benchmark=bench)) == [(4, 1)] * 4


def close_table(b: int) -> list[AlgoPerf]:
    """Single calls a few percent apart: algo 2 fastest but non-deterministic, algo 0 5.3% behind it, algo 1 5%
    behind algo 0 with 2 MiB of workspace, algo 3 20% behind."""
    return [
        AlgoPerf(b, 0, 1.0 * b, 0),
        AlgoPerf(b, 1, 1.05 * b, 2 * MiB),
        AlgoPerf(b, 2, 0.95 * b, 0, deterministic=False),
        AlgoPerf(b, 3, 1.2 * b, 0),
    ]


def rival(result) -> tuple[int, int] | None:  # type: ignore[no-untyped-def]
    return None if result.rival is None else (result.rival.batch, result.rival.algo)


def test_a_plan_of_one_call_names_the_runner_up_find_timed_close_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two single calls a few percent apart are ranked by Find's noise: the planner names the runner-up, the
    fastest other call that the same request could run (within the limit, deterministic if asked), when it is
    within UCUDNN_VERIFY_CLOSE of the plan, and the shim checks the two on real executions."""
    monkeypatch.delenv("UCUDNN_VERIFY_CLOSE", raising=False)
    kw: dict[str, object] = {"policy": "undivided", "benchmark": close_table}
    free = plan(Planner(), Recorded(), **kw)
    assert steps(free) == [(16, 2)] and rival(free) == (16, 0)
    det = plan(Planner(), Recorded(), deterministic_only=True, **kw)
    assert steps(det) == [(16, 0)] and rival(det) == (16, 1)
    # Algo 1 does not fit 1 MiB, and algo 3, the next, is 20% behind: no runner-up.
    assert rival(plan(Planner(), Recorded(), deterministic_only=True, workspace_limit_bytes=MiB, **kw)) is None
    monkeypatch.setenv("UCUDNN_VERIFY_CLOSE", "0.04")
    assert rival(plan(Planner(), Recorded(), deterministic_only=True, **kw)) is None
    monkeypatch.setenv("UCUDNN_VERIFY_CLOSE", "0")
    assert rival(plan(Planner(), Recorded(), **kw)) is None
    # A divided plan is checked against the undivided choice, not a runner-up.
    monkeypatch.delenv("UCUDNN_VERIFY_CLOSE")
    assert len(steps(divided := plan(Planner(), Recorded()))) > 1 and divided.rival is None
    # Nor is a plan chosen for its workspace within UCUDNN_TIME_SLACK: the faster runner-up would undo the choice.
    monkeypatch.setenv("UCUDNN_TIME_SLACK", "0.5")
    slack = plan(Planner(), Recorded(), deterministic_only=True, **kw)
    assert steps(slack) == [(16, 0)] and slack.rival is None, slack.message


@pytest.mark.parametrize("kept", [True, False])
def test_a_verdict_against_the_runner_up_settles_the_plan_while_that_is_still_the_runner_up(
    tmp_path: Path, kept: bool
) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    planner = Planner(cache)
    kw: dict[str, object] = {"policy": "undivided", "benchmark": close_table, "deterministic_only": True}
    first = plan(planner, Recorded(), **kw)
    assert steps(first) == [(16, 0)] and rival(first) == (16, 1) and not first.verified
    pk = PlanKey(KEY, BACKEND, 16, "undivided", 4 * MiB, True)
    cache.put_verdict(Verdict(pk, ((16, 0, 0),), ((16, 1, 0),), kept, 16.0, 15.0, 3))
    settled = plan(planner, Recorded(), **kw)
    assert settled.verified and settled.rival is None
    assert steps(settled) == ([(16, 0)] if kept else [(16, 1)]), settled.message
    # N measured again: algo 3 is now the runner-up, 1% behind, which the verdict never timed: checked again.
    cache.put_benchmark(KEY, BACKEND, 16, [*close_table(16)[:3], AlgoPerf(16, 3, 16.16, 0)])
    again = plan(planner, Recorded(), **kw)
    assert not again.verified and steps(again) == [(16, 0)] and rival(again) == (16, 3)
