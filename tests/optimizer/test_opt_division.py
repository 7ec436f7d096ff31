"""Workspace Division: the ILP against brute force, the greedy baseline, exact byte budgets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ucudnn.optimizer import (
    DivisionResult,
    KernelOptions,
    MicroBatch,
    Plan,
    Status,
    divide_workspace,
    divide_workspace_greedy,
)

from .opt_brute import best_division, close


def plan(time_ms: float, workspace_bytes: int, batch: int = 1, algo: int = 0) -> Plan:
    return Plan((MicroBatch(batch, algo, time_ms, workspace_bytes),))


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[KernelOptions], int]:
    kernels = []
    for k in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 4))
        plans = tuple(plan(draw(st.floats(0.0, 50.0)), draw(st.integers(0, 1000)), algo=j) for j in range(n))
        kernels.append(KernelOptions(f"k{k}", plans))
    return kernels, draw(st.integers(0, 3000))


def check_result(result: DivisionResult, kernels: list[KernelOptions], budget: int) -> None:
    assert len(result.plans) == len(kernels)
    chosen = [p for p in result.plans if p is not None]
    assert len(chosen) == len(kernels)
    for p, k in zip(result.plans, kernels, strict=True):
        assert any(p is q for q in k.plans)  # one of that kernel's own plans
    assert result.total_workspace_bytes == sum(p.workspace_bytes for p in chosen) <= budget
    assert close(result.total_time_ms, sum(p.time_ms for p in chosen))


@settings(max_examples=150, deadline=None)
@given(instances())
def test_ilp_matches_brute_force_and_greedy_is_never_better(inst: tuple[list[KernelOptions], int]) -> None:
    kernels, budget = inst
    expected = best_division(kernels, budget)
    ilp = divide_workspace(kernels, total_workspace_bytes=budget)
    greedy = divide_workspace_greedy(kernels, total_workspace_bytes=budget)
    if expected is None:
        assert ilp.status is Status.INFEASIBLE and greedy.status is Status.INFEASIBLE
        assert all(p is None for p in ilp.plans) and ilp.message
        return
    assert ilp.status is Status.OPTIMAL, ilp.message
    check_result(ilp, kernels, budget)
    assert close(ilp.total_time_ms, expected)
    assert greedy.status is Status.FEASIBLE
    check_result(greedy, kernels, budget)
    assert greedy.total_time_ms >= ilp.total_time_ms or close(greedy.total_time_ms, ilp.total_time_ms)


def test_byte_exact_budget_with_huge_workspaces() -> None:
    # In MiB the two upgrades overshoot the budget by one byte (1e-6 MiB: inside a MILP solver's tolerance);
    # in bytes they do not fit together, so only one kernel may be upgraded.
    big = 1 << 33
    kernels = [
        KernelOptions("a", (plan(10.0, 0), plan(1.0, big + 1))),
        KernelOptions("b", (plan(10.0, 0), plan(1.5, big))),
    ]
    for result in (
        divide_workspace(kernels, total_workspace_bytes=2 * big),
        divide_workspace_greedy(kernels, total_workspace_bytes=2 * big),
    ):
        check_result(result, kernels, 2 * big)
        assert result.total_time_ms == 11.0
    both = divide_workspace(kernels, total_workspace_bytes=2 * big + 1)
    assert both.status is Status.OPTIMAL and both.total_time_ms == 2.5


def test_large_workspaces_many_kernels_stay_exact() -> None:
    kernels = [
        KernelOptions(f"k{i}", tuple(plan(100.0 / (j + 1) + i, (j * 3 + i) * 1_000_000_007, algo=j) for j in range(5)))
        for i in range(12)
    ]
    budget = 150_000_000_000
    result = divide_workspace(kernels, total_workspace_bytes=budget)
    assert result.status is Status.OPTIMAL
    check_result(result, kernels, budget)
    greedy = divide_workspace_greedy(kernels, total_workspace_bytes=budget)
    assert greedy.total_time_ms >= result.total_time_ms - 1e-9


def test_budget_too_small_is_infeasible_with_the_missing_bytes() -> None:
    kernels = [KernelOptions("a", (plan(1.0, 100),)), KernelOptions("b", (plan(1.0, 50), plan(0.5, 80)))]
    result = divide_workspace(kernels, total_workspace_bytes=149)
    assert result.status is Status.INFEASIBLE
    assert "149" in result.message and "150" in result.message
    assert result.plans == (None, None) and result.total_time_ms == 0.0
    assert divide_workspace(kernels, total_workspace_bytes=150).status is Status.OPTIMAL


def test_kernel_without_plans_is_named() -> None:
    result = divide_workspace([KernelOptions("conv9.bwd_filter", ())], total_workspace_bytes=10)
    assert result.status is Status.INFEASIBLE and "conv9.bwd_filter" in result.message


def test_kernel_needing_more_than_the_budget_is_named() -> None:
    result = divide_workspace(
        [KernelOptions("x", ()), KernelOptions("y", (plan(1.0, 11),))][1:], total_workspace_bytes=10
    )
    assert result.status is Status.INFEASIBLE and "'y'" in result.message and "11" in result.message


def test_budget_smaller_than_sum_of_optima_trades_off() -> None:
    # Each kernel alone would take its 100-byte plan; with 150 bytes only the bigger saving is bought.
    kernels = [
        KernelOptions("a", (plan(10.0, 0), plan(4.0, 100))),
        KernelOptions("b", (plan(10.0, 0), plan(7.0, 100))),
    ]
    result = divide_workspace(kernels, total_workspace_bytes=150)
    assert result.total_time_ms == 14.0 and result.plans[0] is kernels[0].plans[1]


def test_greedy_can_be_suboptimal() -> None:
    # Best ratio first (a: 9 ms for 10 bytes) blocks the better use of the budget (b: 50 ms for 100 bytes).
    kernels = [
        KernelOptions("a", (plan(10.0, 0), plan(1.0, 10))),
        KernelOptions("b", (plan(60.0, 0), plan(10.0, 100))),
    ]
    ilp = divide_workspace(kernels, total_workspace_bytes=100)
    greedy = divide_workspace_greedy(kernels, total_workspace_bytes=100)
    assert ilp.total_time_ms == 20.0
    assert greedy.total_time_ms == 61.0


def test_empty_kernel_list_is_trivially_optimal() -> None:
    result = divide_workspace([], total_workspace_bytes=0)
    assert result.status is Status.OPTIMAL and result.plans == () and result.total_time_ms == 0.0


def test_same_input_same_answer() -> None:
    kernels = [KernelOptions(f"k{i}", (plan(5.0, 0), plan(3.0, 10), plan(2.0, 20))) for i in range(6)]
    a = divide_workspace(kernels, total_workspace_bytes=50)
    b = divide_workspace(kernels, total_workspace_bytes=50)
    assert a.plans == b.plans and a.total_time_ms == b.total_time_ms == 5 * 3.0 + 5.0


def test_invalid_input_raises() -> None:
    ok = [KernelOptions("a", (plan(1.0, 0),))]
    with pytest.raises(ValueError, match="total_workspace_bytes"):
        divide_workspace(ok, total_workspace_bytes=-1)
    with pytest.raises(ValueError, match="time_limit_s"):
        divide_workspace(ok, total_workspace_bytes=0, time_limit_s=0)
    with pytest.raises(TypeError, match=r"kernels\[0\]"):
        divide_workspace(["a"], total_workspace_bytes=0)  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"kernels\[0\]\.plans\[0\]"):
        divide_workspace([KernelOptions("a", (plan(-1.0, 0),))], total_workspace_bytes=0)


def test_rounding_overshoot_is_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    # In GiB units a one-byte overshoot is below the solver's tolerance, so the solver's first answer breaks
    # the byte budget and must be caught and cut off.
    import ucudnn.optimizer.division as division

    monkeypatch.setattr(division, "_MIB", float(1 << 30))
    big = 1 << 33
    kernels = [
        KernelOptions("a", (plan(10.0, 0), plan(4.0, big // 2), plan(1.0, big + 1))),
        KernelOptions("b", (plan(10.0, 0), plan(5.0, big // 2), plan(1.5, big))),
    ]
    result = divide_workspace(kernels, total_workspace_bytes=2 * big)
    check_result(result, kernels, 2 * big)
    assert result.total_time_ms == pytest.approx(min(1.0 + 5.0, 4.0 + 1.5))
    assert result.status is Status.OPTIMAL and "overshoot" in result.message
