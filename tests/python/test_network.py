"""Workspace Division bookkeeping (ucudnn.network): kernels join as they are planned, the budget is re-divided
over everything seen so far from cached benchmarks, the shim's plans are dropped only when other kernels' shares
change, and every kernel is planned under its share."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import pytest

from tests.conftest import assert_native_output_diverted
from ucudnn.network import OVER_BUDGET, Division, Network
from ucudnn.optimizer import AlgoPerf, PlanResult, Status, keeps_quantum
from ucudnn.planner import NetworkKernel, Planner
from ucudnn.policy import KernelOverride, WorkspacePolicy

BACKEND = "device=test;cudnn=0;lib=none"
MiB = 1024**2


class Kernel:
    """A synthetic kernel: algo 0 needs no workspace and is slow; algo 1 needs `ws_per_sample` per sample and is
    `speedup` times faster; both need `floor` bytes more whatever the micro-batch size (so no plan needs less);
    records the sizes it is benchmarked at."""

    def __init__(self, name: str, per_sample_ms: float, ws_per_sample: int, speedup: float, floor: int = 0) -> None:
        self.key = f"op=fwd;layer={name}"
        self.per_sample_ms, self.ws, self.speedup, self.floor = per_sample_ms, ws_per_sample, speedup, floor
        self.calls: list[int] = []

    def __call__(self, b: int) -> Sequence[AlgoPerf]:
        self.calls.append(b)
        t = self.per_sample_ms * b
        return [
            AlgoPerf(b, 0, t + 0.01, self.floor),
            AlgoPerf(b, 1, t / self.speedup + 0.01, self.floor + self.ws * b),
        ]


class Recorder:
    def __init__(self) -> None:
        self.clears = 0
        self.notes: list[Division] = []

    def clear(self) -> None:
        self.clears += 1

    def note(self, d: Division) -> None:
        self.notes.append(d)


def make(budget: int | None, **policy: object) -> tuple[Network, Recorder]:
    rec = Recorder()
    pol = WorkspacePolicy(total_workspace_bytes=budget, **policy)  # type: ignore[arg-type]
    return Network(Planner(policy=pol), clear_plans=rec.clear, note=rec.note), rec


def ask(net: Network, k: Kernel, *, batch: int = 16, limit: int = 1 << 40, det: bool = False) -> PlanResult:
    return net.plan(
        key=k.key,
        backend_id=BACKEND,
        batch=batch,
        workspace_limit_bytes=limit,
        policy="powerOfTwo",
        deterministic_only=det,
        algo_count=2,
        benchmark=k,
        op=0,
    )


def kernels() -> list[Kernel]:
    return [Kernel("a", 1.0, MiB, 4.0), Kernel("b", 0.5, 2 * MiB, 2.0), Kernel("c", 2.0, MiB // 2, 8.0)]


def test_kernels_join_and_the_budget_is_redivided() -> None:
    net, rec = make(16 * MiB)
    ks = kernels()
    first = ask(net, ks[0])
    assert first.plan is not None
    d1 = net.division()
    assert d1 is not None and len(d1.shares) == 1 and rec.clears == 0
    assert first.plan.workspace_bytes <= 16 * MiB
    for k in ks[1:]:
        assert ask(net, k).plan is not None
    d = net.division()
    assert d is not None and len(d.shares) == 3 and net.divisions == 3 and len(rec.notes) == 3
    assert d.total_workspace_bytes <= 16 * MiB
    assert rec.clears >= 1  # kernel a's share of the whole budget had to shrink
    # Each kernel's plan is the division's choice for it (same time and workspace).
    for k in ks:
        share = d.share_of(k.key, 16)
        got = ask(net, k)
        assert share is not None and share.plan is not None and got.plan is not None
        assert got.plan.workspace_bytes == share.plan.workspace_bytes
        assert got.plan.time_ms == pytest.approx(share.plan.time_ms)
    # Asking again changes nothing: no new division, no clear.
    clears, divisions = rec.clears, net.divisions
    ask(net, ks[1])
    assert (rec.clears, net.divisions) == (clears, divisions)


def test_division_equals_the_offline_ilp() -> None:
    budget = 20 * MiB
    net, _ = make(budget)
    ks = kernels()
    for k in ks:
        ask(net, k)
    d = net.division()
    assert d is not None
    offline = Planner(policy=WorkspacePolicy(total_workspace_bytes=budget)).plan_network(
        [NetworkKernel(k.key, 16, 2, k, 0) for k in ks],
        backend_id=BACKEND,
        total_workspace_bytes=budget,
        policy="powerOfTwo",
    )
    assert offline.status is Status.OPTIMAL
    assert d.total_time_ms == pytest.approx(offline.total_time_ms)
    assert [s.plan for s in d.shares] == list(offline.plans)


def test_nothing_is_benchmarked_twice() -> None:
    net, _ = make(16 * MiB)
    ks = kernels()
    for _ in range(3):
        for k in ks:
            ask(net, k)
    for k in ks:
        assert sorted(k.calls) == [1, 2, 4, 8, 16], k.calls
    # A "second run" on the same cache: a fresh network measures nothing.
    again = Network(net.planner)
    for k in ks:
        k.calls.clear()
        assert ask(again, k).plan is not None
        assert k.calls == []


def test_clears_only_when_other_shares_change() -> None:
    # A roomy budget: every kernel gets its optimum, so a newcomer never moves anyone.
    net, rec = make(1024 * MiB)
    for k in kernels():
        ask(net, k)
    assert rec.clears == 0 and net.divisions == 3
    d = net.division()
    assert d is not None and d.status == "optimal"


def test_a_smaller_caller_workspace_caps_the_share() -> None:
    net, _ = make(16 * MiB)
    ks = kernels()
    for k in ks:
        ask(net, k)
    d = net.division()
    assert d is not None
    share = d.share_of(ks[0].key, 16)
    assert share is not None and share.workspace_bytes is not None and share.workspace_bytes > MiB
    got = ask(net, ks[0], limit=MiB)
    assert got.plan is not None and got.plan.workspace_bytes <= MiB
    assert got.plan.time_ms >= share.plan.time_ms  # type: ignore[union-attr]


def test_deterministic_requests_stay_within_the_share() -> None:
    net, _ = make(8 * MiB)
    for k in kernels():
        got = ask(net, k, det=True)
        assert got.plan is not None and got.plan.deterministic
    d = net.division()
    assert d is not None
    for s in d.shares:
        got = ask(net, next(k for k in kernels() if k.key == s.key), det=True)
        assert got.plan is not None and s.workspace_bytes is not None
        assert got.plan.workspace_bytes <= s.workspace_bytes


def test_tiny_budget_gives_zero_workspace_plans() -> None:
    net, _ = make(1)
    for k in kernels():
        got = ask(net, k)
        assert got.plan is not None and got.plan.workspace_bytes == 0
    d = net.division()
    assert d is not None and d.total_workspace_bytes == 0 and d.status == "optimal"


def test_budget_too_small_for_the_least_workspace_plans(caplog: pytest.LogCaptureFixture) -> None:
    # Every plan of these kernels needs 16 MiB or more.
    ks = [Kernel(n, 1.0, MiB, 4.0, floor=16 * MiB) for n in ("p", "q")]
    net, _ = make(20 * MiB)
    logger = logging.getLogger("ucudnn")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="ucudnn"):
            for k in ks:
                ask(net, k)
    finally:
        logger.removeHandler(caplog.handler)
    d = net.division()
    assert d is not None and d.status == OVER_BUDGET
    got = [ask(net, k) for k in ks]  # the first one planned before the second joined
    assert all(r.plan is not None and r.plan.workspace_bytes == 16 * MiB for r in got)
    assert d.total_workspace_bytes == 32 * MiB > d.budget_bytes
    assert "least-workspace" in caplog.text


def test_kernel_with_nothing_under_the_budget_passes_through() -> None:
    big = Kernel("big", 1.0, MiB, 4.0, floor=64 * MiB)
    small = kernels()[0]
    net, _ = make(32 * MiB)
    assert ask(net, big).status is Status.INFEASIBLE
    got = ask(net, small)
    assert got.plan is not None
    d = net.division()
    assert d is not None and d.share_of(big.key, 16) is not None
    assert d.share_of(big.key, 16).plan is None  # type: ignore[union-attr]
    assert "pass through" in d.message
    assert d.total_workspace_bytes <= 32 * MiB


def test_another_batch_size_is_another_member() -> None:
    net, _ = make(16 * MiB)
    k = kernels()[0]
    ask(net, k, batch=16)
    ask(net, k, batch=8)
    d = net.division()
    assert d is not None and [(s.batch) for s in d.shares] == [16, 8]
    assert d.total_workspace_bytes <= 16 * MiB


def test_changed_settings_redivide_known_kernels() -> None:
    net, rec = make(16 * MiB)
    ks = kernels()
    for k in ks:
        ask(net, k)
    clears = rec.clears
    assert net.planner.policy is not None
    net.planner.policy = replace(net.planner.policy, total_workspace_bytes=4 * MiB)
    ask(net, ks[0])
    d = net.division()
    assert d is not None and d.budget_bytes == 4 * MiB and len(d.shares) == 3
    assert d.total_workspace_bytes <= 4 * MiB
    assert rec.clears == clears + 1


def test_override_caps_a_kernel_share() -> None:
    ks = kernels()
    net, _ = make(64 * MiB, overrides=(KernelOverride(MiB, key_contains="layer=a"),))
    for k in ks:
        ask(net, k)
    d = net.division()
    assert d is not None
    share = d.share_of(ks[0].key, 16)
    assert share is not None and share.workspace_bytes is not None and share.workspace_bytes <= MiB


def test_no_budget_is_workspace_reuse() -> None:
    net, rec = make(None)
    k = kernels()[0]
    got = ask(net, k, limit=2 * MiB)
    assert got.plan is not None and got.plan.workspace_bytes <= 2 * MiB
    assert net.division() is None and rec.notes == [] and net.divisions == 0


def test_bad_requests_are_refused() -> None:
    net, _ = make(16 * MiB)
    k = kernels()[0]
    with pytest.raises(ValueError):
        net.plan(
            key="",
            backend_id=BACKEND,
            batch=16,
            workspace_limit_bytes=1,
            policy="powerOfTwo",
            deterministic_only=False,
            algo_count=2,
            benchmark=k,
        )
    with pytest.raises(ValueError):
        ask(net, k, batch=0)


def test_division_json() -> None:
    net, _ = make(16 * MiB)
    for k in kernels():
        ask(net, k)
    d = net.division(BACKEND)
    assert d is not None
    js = d.to_json()
    assert js["budget_bytes"] == 16 * MiB and len(js["kernels"]) == 3
    assert sum(k["workspace_bytes"] for k in js["kernels"]) == js["total_workspace_bytes"]
    assert net.division("another backend") is None


def test_solver_printf_goes_to_stderr() -> None:
    code = (
        "import ctypes\n"
        "from ucudnn._stdio import native_stdout_to_stderr\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.printf(b'before\\n')\n"  # buffered by C stdio (a pipe): must still reach stdout
        "with native_stdout_to_stderr():\n"
        "    libc.printf(b'solver noise\\n')\n"
        "libc.printf(b'after\\n')\n"
        "libc.fflush(None)\n"
    )
    assert_native_output_diverted(code, "solver noise")


def test_a_kernel_with_an_alignment_quantum_gets_a_share_it_can_use() -> None:
    """A graph whose declared alignment holds only every 4 samples (align_quantum 4) can run no micro-batch but its
    last off that grid. Its front holds only such plans, so the division gives it a share it can use: each
    kernel's plan under its share is the division's choice, and the predicted total is what the plans take."""
    net, _ = make(3 * MiB)
    a, b = Kernel("a", 1.0, MiB, 4.0), Kernel("b", 0.5, 2 * MiB, 2.0)

    def ask_q(k: Kernel, quantum: int) -> PlanResult:
        return net.plan(
            key=k.key, backend_id=BACKEND, batch=12, workspace_limit_bytes=1 << 40, policy="all",
            deterministic_only=False, algo_count=2, benchmark=k, op=0, align_quantum=quantum,
        )  # fmt: skip

    ask_q(a, 4)
    ask_q(b, 1)
    d = net.division()
    assert d is not None
    got = {k.key: ask_q(k, q).plan for k, q in ((a, 4), (b, 1))}
    for k in (a, b):
        share = d.share_of(k.key, 12)
        plan = got[k.key]
        assert share is not None and share.plan is not None and plan is not None
        assert plan.time_ms == pytest.approx(share.plan.time_ms), (k.key, share.plan, plan)
        assert plan.workspace_bytes <= share.plan.workspace_bytes
    plan_a = got[a.key]
    assert plan_a is not None and keeps_quantum(plan_a, 4)
    # Within 3 MiB no part of a can use its fast algorithm (4 samples need 4 MiB) except a last one of at most 3
    # samples, which leaves 9, not a multiple of 4: a runs slow, and b (no quantum) gets the whole budget.
    share_b = d.share_of(b.key, 12)
    assert share_b is not None and share_b.plan is not None and share_b.plan.workspace_bytes == 2 * MiB
    assert d.total_time_ms == pytest.approx(sum(p.time_ms for p in got.values() if p is not None))
