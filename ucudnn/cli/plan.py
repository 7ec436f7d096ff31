"""``ucudnn plan``: plan micro-batches from a recorded performance table.

Workspace Reuse (one kernel, per-kernel limit): ``--workspace LIMIT`` (``--pareto`` for the whole trade-off
curve). Workspace Division (all kernels, one budget): ``--total-workspace LIMIT``. Exit status: 0 planned,
1 infeasible (nothing fits), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ucudnn import perf_table
from ucudnn._stdio import native_stdout_to_stderr as native_stdout_to_stderr  # re-exported (bench imports it here)
from ucudnn.config import ConfigError, format_size, parse_size
from ucudnn.optimizer import (
    BatchSizePolicy,
    DivisionResult,
    KernelOptions,
    Plan,
    Status,
    best_plan,
    divide_workspace,
    divide_workspace_greedy,
    pareto_front,
    parse_policy,
)
from ucudnn.plan_text import format_plan, op_of_key, short_kernel_name

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT = 0, 1, 2


class _BadInput(Exception):
    pass


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plan",
        help="plan micro-batches from a recorded performance table",
        description="Plan micro-batches from a JSON performance table. With --workspace: Workspace Reuse for one "
        "kernel. With --total-workspace: Workspace Division of one budget over all kernels. Exit status 0 when "
        "planned, 1 when nothing fits, 2 for bad input.",
    )
    p.add_argument("--table", required=True, metavar="FILE", help="JSON performance table")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--workspace", metavar="LIMIT", help="per-kernel workspace limit (bytes, 64MiB, 1GiB)")
    mode.add_argument("--total-workspace", metavar="LIMIT", help="workspace budget shared by all kernels")
    mode.add_argument("--list", action="store_true", help="list the table's kernels (index, short name) and exit")
    p.add_argument(
        "--kernel",
        metavar="K",
        help="kernel to plan (Workspace Reuse): its index in --list, a part of exactly one kernel's name, or the "
        "name (default: the only one)",
    )
    p.add_argument("--batch", type=int, metavar="B", help="mini-batch size (default: the kernel's batch)")
    p.add_argument("--policy", default="powerOfTwo", metavar="P", help="undivided, powerOfTwo (default) or all")
    p.add_argument("--pareto", action="store_true", help="print the whole time/workspace Pareto set")
    p.add_argument("--deterministic", action="store_true", help="use deterministic algorithms only")
    p.add_argument("--method", choices=("ilp", "greedy"), default="ilp", help="Workspace Division solver")
    p.add_argument("--time-limit", type=float, metavar="S", help="ILP time limit in seconds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (_BadInput, perf_table.PerfTableError, ConfigError, ValueError) as exc:
        print(f"ucudnn plan: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _run(args: argparse.Namespace) -> int:
    if args.list:
        kernels = perf_table.load(args.table)
        if args.json:
            print(
                json.dumps(
                    [
                        {"index": i, "name": k.name, "short_name": short_kernel_name(k.name), "batch": k.batch}
                        for i, k in enumerate(kernels)
                    ],
                    indent=2,
                )
            )
        else:
            print("\n".join(perf_table.describe(kernels)))
        return EXIT_OK
    policy = parse_policy(args.policy)
    if args.batch is not None and args.batch < 1:
        raise _BadInput(f"--batch must be positive, not {args.batch}")
    if args.total_workspace is not None:
        for flag, used in (("--pareto", args.pareto), ("--kernel", args.kernel), ("--batch", args.batch)):
            if used:
                raise _BadInput(f"{flag} applies to Workspace Reuse (--workspace), not --total-workspace")
        budget = parse_size(args.total_workspace, name="--total-workspace")
        return _division(args, perf_table.load(args.table), budget, policy)
    if args.time_limit is not None or args.method != "ilp":
        raise _BadInput("--method and --time-limit apply to Workspace Division (--total-workspace)")
    workspace_limit_bytes = parse_size(args.workspace, name="--workspace")
    kernels = perf_table.load(args.table)
    kernel = perf_table.find(kernels, args.kernel)
    return _reuse(args, kernel, workspace_limit_bytes, policy)


def _plan_json(name: str, plan: Plan) -> dict[str, Any]:
    return {
        "name": name,
        "time_ms": plan.time_ms,
        "workspace_bytes": plan.workspace_bytes,
        "deterministic": plan.deterministic,
        "micro_batches": [
            {
                "batch": mb.batch,
                "algo": mb.algo,
                "math_type": mb.math_type,
                "deterministic": mb.deterministic,
                "time_ms": mb.time_ms,
                "workspace_bytes": mb.workspace_bytes,
            }
            for mb in plan.micro_batches
        ],
    }


def _plan_text(name: str, plan: Plan) -> str:
    """``4 x 32 GEMM (math 1)``: the notation of every table (:mod:`ucudnn.plan_text`)."""
    return format_plan(((mb.batch, mb.algo, mb.math_type) for mb in plan.micro_batches), op_of_key(name))


def _infeasible(args: argparse.Namespace, name: str, message: str) -> int:
    if args.json:
        print(json.dumps({"name": name, "status": Status.INFEASIBLE.value, "message": message}, indent=2))
    else:
        print(f"{short_kernel_name(name)}: infeasible: {message}")
    return EXIT_INFEASIBLE


def _heading(name: str, batch: int, policy: BatchSizePolicy, workspace_limit_bytes: int) -> str:
    limit = format_size(workspace_limit_bytes)
    return f"{short_kernel_name(name)}: batch {batch}, policy {policy.value}, limit {limit}"


def _reuse(
    args: argparse.Namespace, kernel: perf_table.KernelTable, workspace_limit_bytes: int, policy: BatchSizePolicy
) -> int:
    batch = args.batch if args.batch is not None else kernel.batch
    perf_table.check_coverage(kernel, batch, policy)
    common = {
        "batch": batch,
        "workspace_limit_bytes": workspace_limit_bytes,
        "policy": policy,
        "deterministic_only": args.deterministic,
    }
    if args.pareto:
        front = pareto_front(kernel.perfs, **common)
        if not front:
            result = best_plan(kernel.perfs, **common)
            return _infeasible(args, kernel.name, result.message)
        by_time = sorted(front, key=lambda p: (p.time_ms, p.workspace_bytes))
        if args.json:
            print(json.dumps([_plan_json(kernel.name, p) for p in by_time], indent=2))
        else:
            print(f"{_heading(kernel.name, batch, policy, workspace_limit_bytes)}: {len(front)} plan(s)")
            print(f"{'time ms':>10} {'workspace':>10}  micro-batches (count x size algorithm)")
            for p in by_time:
                print(f"{p.time_ms:10.4g} {format_size(p.workspace_bytes):>10}  {_plan_text(kernel.name, p)}")
        return EXIT_OK
    result = best_plan(kernel.perfs, **common)
    if result.plan is None:
        return _infeasible(args, kernel.name, result.message)
    plan = result.plan
    if args.json:
        out = {
            **_plan_json(kernel.name, plan),
            "status": result.status.value,
            "message": result.message,
            "batch": batch,
            "policy": policy.value,
            "workspace_limit_bytes": workspace_limit_bytes,
        }
        print(json.dumps(out, indent=2))
    else:
        print(_heading(kernel.name, batch, policy, workspace_limit_bytes))
        print(
            f"  time {plan.time_ms:.6g} ms, workspace {format_size(plan.workspace_bytes)}, "
            f"{'deterministic' if plan.deterministic else 'non-deterministic'}"
        )
        print(f"  micro-batches (count x size algorithm): {_plan_text(kernel.name, plan)}")
    return EXIT_OK


def _division(
    args: argparse.Namespace, kernels: tuple[perf_table.KernelTable, ...], budget: int, policy: BatchSizePolicy
) -> int:
    options: list[KernelOptions] = []
    for k, kernel in enumerate(kernels):
        perf_table.check_coverage(kernel, kernel.batch, policy, where=f"kernels[{k}] ({kernel.name!r})")
        front = pareto_front(
            kernel.perfs,
            batch=kernel.batch,
            workspace_limit_bytes=budget,
            policy=policy,
            deterministic_only=args.deterministic,
        )
        options.append(KernelOptions(kernel.name, front))
    result: DivisionResult
    if args.method == "greedy":
        result = divide_workspace_greedy(options, total_workspace_bytes=budget)
    else:
        with native_stdout_to_stderr():
            result = divide_workspace(options, total_workspace_bytes=budget, time_limit_s=args.time_limit)
    chosen = [(ko.name, p) for ko, p in zip(options, result.plans, strict=True) if p is not None]
    if args.json:
        out = {
            "status": result.status.value,
            "message": result.message,
            "method": args.method,
            "policy": policy.value,
            "total_workspace_limit_bytes": budget,
            "total_time_ms": result.total_time_ms,
            "total_workspace_bytes": result.total_workspace_bytes,
            "solve_time_s": result.solve_time_s,
            "kernels": [_plan_json(name, p) for name, p in chosen],
        }
        print(json.dumps(out, indent=2))
    else:
        print(
            f"workspace division ({args.method}), policy {policy.value}, budget {format_size(budget)}: "
            f"{result.status.value}"
        )
        print(f"  {result.message}")
        if chosen:
            shown = [short_kernel_name(name, 48) for name, _ in chosen]
            width = max(len("kernel"), *(len(s) for s in shown))
            print(f"{'kernel':<{width}} {'time ms':>10} {'workspace':>10}  micro-batches (count x size algorithm)")
            for short, (name, p) in zip(shown, chosen, strict=True):
                print(f"{short:<{width}} {p.time_ms:10.4g} {format_size(p.workspace_bytes):>10}  {_plan_text(name, p)}")
            print(
                f"{'total':<{width}} {result.total_time_ms:10.4g} {format_size(result.total_workspace_bytes):>10}  "
                f"(solved in {result.solve_time_s:.3g} s)"
            )
    if result.status in (Status.OPTIMAL, Status.FEASIBLE):
        return EXIT_OK
    if result.status is Status.TIME_LIMIT and chosen:
        return EXIT_OK
    return EXIT_INFEASIBLE
