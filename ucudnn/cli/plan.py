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
from ucudnn.config import ConfigError, parse_size
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
    p.add_argument("--kernel", metavar="NAME", help="kernel to plan (Workspace Reuse; default: the only one)")
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
    limit = parse_size(args.workspace, name="--workspace")
    kernels = perf_table.load(args.table)
    kernel = perf_table.find(kernels, args.kernel)
    return _reuse(args, kernel, limit, policy)


def _plan_json(name: str, plan: Plan) -> dict[str, Any]:
    return {
        "name": name,
        "time_ms": plan.time_ms,
        "workspace_bytes": plan.workspace_bytes,
        "deterministic": plan.deterministic,
        "micro_batches": [
            {"batch": mb.batch, "algo": mb.algo, "math_type": mb.math_type, "deterministic": mb.deterministic,
             "time_ms": mb.time_ms, "workspace_bytes": mb.workspace_bytes}
            for mb in plan.micro_batches
        ],
    }


def _plan_text(plan: Plan) -> str:
    """Equal consecutive micro-batches are grouped: ``4 x 32 (algo 1)``."""
    groups: list[list[Any]] = []
    for mb in plan.micro_batches:
        if groups and groups[-1][1:] == [mb.batch, mb.algo, mb.math_type]:
            groups[-1][0] += 1
        else:
            groups.append([1, mb.batch, mb.algo, mb.math_type])
    parts = []
    for count, batch, algo, math_type in groups:
        mt = f", math {math_type}" if math_type else ""
        parts.append(f"{count} x {batch} (algo {algo}{mt})")
    return " + ".join(parts)


def _infeasible(args: argparse.Namespace, name: str, message: str) -> int:
    if args.json:
        print(json.dumps({"name": name, "status": Status.INFEASIBLE.value, "message": message}, indent=2))
    else:
        print(f"{name}: infeasible: {message}")
    return EXIT_INFEASIBLE


def _reuse(args: argparse.Namespace, kernel: perf_table.KernelTable, limit: int, policy: BatchSizePolicy) -> int:
    batch = args.batch if args.batch is not None else kernel.batch
    perf_table.check_coverage(kernel, batch, policy)
    common = {"batch": batch, "workspace_limit_bytes": limit, "policy": policy,
              "deterministic_only": args.deterministic}
    if args.pareto:
        front = pareto_front(kernel.perfs, **common)
        if not front:
            result = best_plan(kernel.perfs, **common)
            return _infeasible(args, kernel.name, result.message)
        by_time = sorted(front, key=lambda p: (p.time_ms, p.workspace_bytes))
        if args.json:
            print(json.dumps([_plan_json(kernel.name, p) for p in by_time], indent=2))
        else:
            print(f"{kernel.name}: batch {batch}, policy {policy.value}, limit {limit} bytes: {len(front)} plan(s)")
            print(f"{'time_ms':>12} {'workspace_bytes':>16}  micro-batches")
            for p in by_time:
                print(f"{p.time_ms:12.6g} {p.workspace_bytes:16d}  {_plan_text(p)}")
        return EXIT_OK
    result = best_plan(kernel.perfs, **common)
    if result.plan is None:
        return _infeasible(args, kernel.name, result.message)
    plan = result.plan
    if args.json:
        out = {**_plan_json(kernel.name, plan), "status": result.status.value, "message": result.message,
               "batch": batch, "policy": policy.value, "workspace_limit_bytes": limit}
        print(json.dumps(out, indent=2))
    else:
        print(f"{kernel.name}: batch {batch}, policy {policy.value}, limit {limit} bytes")
        print(f"  time {plan.time_ms:.6g} ms, workspace {plan.workspace_bytes} bytes, "
              f"{'deterministic' if plan.deterministic else 'non-deterministic'}")
        print(f"  micro-batches: {_plan_text(plan)}")
    return EXIT_OK


def _division(
    args: argparse.Namespace, kernels: tuple[perf_table.KernelTable, ...], budget: int, policy: BatchSizePolicy
) -> int:
    options: list[KernelOptions] = []
    for k, kernel in enumerate(kernels):
        perf_table.check_coverage(kernel, kernel.batch, policy, where=f"kernels[{k}] ({kernel.name!r})")
        front = pareto_front(kernel.perfs, batch=kernel.batch, workspace_limit_bytes=budget, policy=policy,
                             deterministic_only=args.deterministic)
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
        print(f"workspace division ({args.method}), policy {policy.value}, budget {budget} bytes: "
              f"{result.status.value}")
        print(f"  {result.message}")
        if chosen:
            width = max(len(name) for name, _ in chosen)
            print(f"{'kernel':<{width}} {'time_ms':>12} {'workspace_bytes':>16}  micro-batches")
            for name, p in chosen:
                print(f"{name:<{width}} {p.time_ms:12.6g} {p.workspace_bytes:16d}  {_plan_text(p)}")
            print(f"{'total':<{width}} {result.total_time_ms:12.6g} {result.total_workspace_bytes:16d}  "
                  f"(solved in {result.solve_time_s:.3g} s)")
    if result.status in (Status.OPTIMAL, Status.FEASIBLE):
        return EXIT_OK
    if result.status is Status.TIME_LIMIT and chosen:
        return EXIT_OK
    return EXIT_INFEASIBLE
