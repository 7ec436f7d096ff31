"""Real clients on random problems: the real cudnn_frontend, in PyTorch's order (torch_v0, both benchmark modes) and
through the v1 graph API (graph_v1), linked to cuDNN or reaching it through dlopen + dlsym as XLA does (a third of
the cases: the _dl builds, test_dlopen_clients.py), on convolutions drawn from a seed -- 2-D and 3-D, NCHW and
channels-last (NHWC) tensors, groups, per-dimension filter, padding, stride and dilation, float, half and bfloat16,
the fused conv + add + bias + relu graph -- each run alone and under the preload library three ways:

- with room for every workspace (and the preload library told so): nothing offered, nothing split, the same
  configurations tried and the same engine as alone, bit for bit;
- with an allocator holding a random fraction of the workspace PyTorch alone would use with room (and the preload
  library told so, as the driver would tell it on a GPU): where alone runs, ucudnn runs; its output is the
  reference's, its workspaces come from that allocator, and its steady calls take no longer than alone's in the
  host backend's model clock (the same every run);
- under an explicit limit of that size: the output is the reference's, and the plan's workspace is within it unless
  the exit summary counts the graph as run over the limit.

test_real_clients.py and test_pressure.py pin chosen problems (NCHW, 3x3, 2-D); these draw the shapes PyTorch also
sends. UCUDNN_TEST_CLIENT_SEED and UCUDNN_TEST_CLIENT_CASES draw others or more.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pytest

from .conftest import Inputs, Problem, Run, RunClient
from .test_pressure import CALLS, ROOMY, steady_ms, under
from .test_real_clients import check_output

pytestmark = pytest.mark.realclient

SEED = int(os.environ.get("UCUDNN_TEST_CLIENT_SEED", "20261127"))
COUNT = int(os.environ.get("UCUDNN_TEST_CLIENT_CASES", "10"))


@dataclass(frozen=True)
class Case:
    problem: Problem
    program: str
    benchmark: int
    fraction: float  # of the roomy run's workspace: the allocator's capacity, and the explicit limit
    seed: int
    loading: str = "linked"  # or "dlopen": the program's _dl build

    @property
    def dlopen(self) -> bool:
        return self.loading == "dlopen"

    @property
    def exe(self) -> str:
        return self.program + ("_dl" if self.dlopen else "")

    def extra(self) -> tuple[str, ...]:
        calls = ("--calls", str(CALLS))
        return calls + (("--benchmark", str(self.benchmark)) if self.program == "torch_v0" else ())

    def __str__(self) -> str:
        p = self.problem
        return (
            f"{self.program} {p.op} {p.dtype} {p.layout} N={p.n} C={p.c} K={p.k} G={p.groups} size={p.extents} "
            f"filt={p.w_shape[2:]} pad={p.params.pad} stride={p.params.stride} dil={p.params.dilation} "
            f"benchmark={self.benchmark} fraction={self.fraction} {self.loading}"
        )


def draw(r: random.Random) -> Case:
    op = r.choice(["fprop", "dgrad", "wgrad", "fused"])
    nsp = r.choice([2, 2, 2, 3])
    groups = r.choice([1, 1, 1, 2, 4])
    filt, pad, stride, dil, size = [], [], [], [], []
    for _ in range(nsp):
        f = r.choice([1, 3, 3, 5] if nsp == 2 else [1, 3])
        d = r.choice([1, 1, 2]) if f > 1 else 1
        eff = (f - 1) * d + 1
        filt.append(f)
        dil.append(d)
        pad.append(r.randint(0, (eff - 1) // 2 + (eff > 1)))
        stride.append(r.choice([1, 1, 2]))
        size.append(r.randint(max(eff, 4), 18 if nsp == 2 else 8))
    problem = Problem(
        op, dtype=r.choice(["float", "float", "float", "half", "bfloat16"]), n=r.randint(2, 12),
        c=groups * r.choice([1, 2, 3, 4, 8]), k=groups * r.choice([2, 4, 8]), size=tuple(size), filt=tuple(filt),
        pad=tuple(pad), stride=tuple(stride), dil=tuple(dil), groups=groups, layout=r.choice(["nchw", "nhwc"]),
    )  # fmt: skip
    program = "graph_v1" if op != "fused" and r.random() < 0.25 else "torch_v0"
    benchmark = r.choice([0, 1]) if program == "torch_v0" else 0
    return Case(problem, program, benchmark, r.choice([0.05, 0.2, 0.5]), r.randrange(1000))


def drawn(draw_case: Callable[[random.Random], Case], seed: int) -> Case:
    """The case ``draw_case`` draws from ``seed``, linked or (one time in three) its dlopen build. Which one is drawn
    from a stream of its own, so that adding that draw changed no problem of a seed."""
    dlopen = random.Random(f"loading-{seed}").random() < 1 / 3
    return replace(draw_case(random.Random(seed)), loading="dlopen" if dlopen else "linked")


CASES = [drawn(draw, SEED * 1000 + i) for i in range(COUNT)]


def no_errors(run: Run, dlopen: bool = False) -> None:
    stats = run.stats
    assert stats["planner_errors"] == 0 and stats["rejected_plans"] == 0, (stats, run.stderr[-2000:])
    assert stats["graph_unrecorded"] == 0, stats
    if dlopen:  # the calls were seen only because dlsym answered with the hooks
        assert stats["dlsym_hooked"] > 0, stats


@dataclass
class Outcome:
    """What one case showed under pressure: alone's and ucudnn's steady modelled times (None: no engine ran)."""

    alone_ms: float | None
    ucudnn_ms: float | None
    split: bool
    limit_split: bool = False  # under the explicit limit: micro-batched
    over_limit: bool = False  # under the explicit limit: run as built, no engine fitting even divided

    def line(self, case: Case) -> str:
        return (
            f"{case}: alone {self.alone_ms} ms, ucudnn {self.ucudnn_ms} ms, split {self.split}, "
            f"limit split {self.limit_split}, over limit {self.over_limit}"
        )


def exercise(run_client: RunClient, case: Case) -> Outcome:
    """Every check of the module's docstring on one case; what it showed under pressure."""
    p, extra = case.problem, case.extra()
    inputs = Inputs.make(p, case.seed)
    roomy = run_client(case.exe, p, inputs, capacity=ROOMY, extra=extra)
    # With room every drawn graph runs (the half fused one too: the host backend keeps its float intermediate in
    # float, as cuDNN's fused engines do, and PyTorch drops engines noted DOWN_CONVERT_INPUTS).
    assert roomy.report["status"] == "ok", (str(case), roomy.report, roomy.stderr[-2000:])
    check_output(roomy, p, inputs)

    # Room for everything: the preload library changes nothing.
    same = run_client(case.exe, p, inputs, capacity=ROOMY, preload=True, extra=extra, env_extra=under(ROOMY))
    no_errors(same, case.dlopen)
    assert same.stats["graph_offers"] == 0 and same.stats["graph_split_plans"] == 0, same.stats
    assert same.report["engine"] == roomy.report["engine"], (roomy.report, same.report)
    assert same.report.get("tried") == roomy.report.get("tried")
    assert same.output is not None and roomy.output is not None
    assert np.array_equal(same.output, roomy.output), str(case)
    assert steady_ms(same) == steady_ms(roomy)

    # Memory short: where alone runs, ucudnn runs, from the same allocator, and no slower.
    capacity = max(4096, int(roomy.report["workspace"] * case.fraction))
    alone = run_client(case.exe, p, inputs, capacity=capacity, extra=extra)
    ucudnn = run_client(case.exe, p, inputs, capacity=capacity, preload=True, extra=extra,
                        env_extra=under(capacity))  # fmt: skip
    no_errors(ucudnn, case.dlopen)
    outcome = Outcome(None, None, ucudnn.stats["graph_split_plans"] > 0)
    if alone.report["status"] == "ok":
        check_output(alone, p, inputs)
        assert ucudnn.report["status"] == "ok", (str(case), ucudnn.report, ucudnn.stderr[-2000:])
        outcome.alone_ms = steady_ms(alone)
    if ucudnn.report["status"] == "ok":
        check_output(ucudnn, p, inputs)
        assert ucudnn.report["allocator_peak"] <= capacity, ucudnn.report
        outcome.ucudnn_ms = steady_ms(ucudnn)
    if outcome.alone_ms is not None and outcome.ucudnn_ms is not None:
        assert outcome.ucudnn_ms <= outcome.alone_ms * (1 + 1e-9), (str(case), alone.report, ucudnn.report)

    # An explicit limit of the same size, with room in the allocator.
    limited = run_client(case.exe, p, inputs, capacity=ROOMY, preload=True, limit=str(capacity), extra=extra)
    no_errors(limited, case.dlopen)
    check_output(limited, p, inputs)
    within = limited.report["workspace"] <= capacity
    assert within or limited.stats["graph_over_limit"] >= 1, (str(case), limited.report, limited.stats)
    outcome.limit_split = limited.stats["graph_split_plans"] > 0
    outcome.over_limit = limited.stats["graph_over_limit"] > 0
    print(outcome.line(case))  # the figures of docs/testing.md: pytest -s
    return outcome


@pytest.mark.parametrize("case", CASES, ids=[f"{SEED}-{i}" for i in range(COUNT)])
def test_a_random_problem_alone_and_under_the_preload_library(run_client: RunClient, case: Case) -> None:
    exercise(run_client, case)


def draw_large(r: random.Random) -> Case:
    """A layer of a CNN's middle (2-D, 3x3 or 5x5, 16 to 64 channels, 10 to 40 million multiply-adds, a batch
    of 8 to 16): large enough that a faster engine can pay for the per-call cost of micro-batches, which the small
    drawn layers never do. Under pressure the allocator holds 5 to 35% of the roomy workspace."""
    while True:
        f = r.choice([3, 3, 5])
        c, k, n, hw = r.choice([16, 32, 64]), r.choice([32, 64]), r.randint(8, 32), r.randint(12, 40)
        macs = n * c * k * f * f * hw * hw
        if 60e6 <= macs <= 250e6:
            break
    problem = Problem(
        r.choice(["fprop", "dgrad", "wgrad", "fused"]), dtype=r.choice(["float", "float", "half", "bfloat16"]),
        n=n, c=c, k=k, size=(hw, hw), filt=(f, f), pad=(f // 2, f // 2), layout=r.choice(["nchw", "nhwc"]),
    )  # fmt: skip
    program = "graph_v1" if problem.op != "fused" and r.random() < 0.25 else "torch_v0"
    benchmark = r.choice([0, 1]) if program == "torch_v0" else 0
    return Case(problem, program, benchmark, r.choice([0.05, 0.15, 0.35]), r.randrange(1000))


LARGE_COUNT = int(os.environ.get("UCUDNN_TEST_CLIENT_LARGE", "3"))
LARGE = [drawn(draw_large, SEED * 1000 + 500 + i) for i in range(LARGE_COUNT)]


@pytest.mark.skipif(LARGE_COUNT < 1, reason="UCUDNN_TEST_CLIENT_LARGE=0")
def test_random_middle_layers_run_faster_under_pressure(run_client: RunClient) -> None:
    """The drawn middle layers (draw_large) get every check of the small ones, and under pressure at least one
    runs faster than alone in the model clock: ucudnn helps where memory is short, by default."""
    faster = 0
    for case in LARGE:
        o = exercise(run_client, case)
        faster += o.ucudnn_ms is not None and (o.alone_ms is None or o.ucudnn_ms < o.alone_ms * (1 - 1e-9))
    assert faster >= 1, "no drawn middle layer ran faster under pressure"


def test_parts_start_where_the_declared_alignment_holds(run_client: RunClient) -> None:
    """Found by the cases above: a dgrad whose dx sample is 3 x 14 x 11 floats (1,848 bytes) in a tensor declared
    32-byte aligned, which only offsets of 4 samples keep. The shim refused the planner's plans whose parts did not
    each hold a multiple of 4 samples -- even the undivided one (11 samples) and a last part, whose sizes no later
    part's offset depends on -- and the graph ran as built, over the limit. The planner now makes every part but
    one a multiple of the quantum (the request's align_quantum) and the shim runs that one last: 4 + 4 + 3."""
    p = Problem("dgrad", n=11, c=3, k=8, size=(14, 11), filt=(3, 3), pad=(0, 2), stride=(2, 1))
    inputs = Inputs.make(p)
    extra = ("--calls", "3", "--benchmark", "0")
    roomy = run_client("torch_v0", p, inputs, extra=extra)
    limit = 3 * roomy.report["workspace"] // 8  # the caller's engine fits 4 samples of the 11, not 5
    env = {"UCUDNN_BATCH_SIZE_POLICY": "all", "UCUDNN_LOG_LEVEL": "info"}
    run = run_client("torch_v0", p, inputs, preload=True, limit=str(limit), extra=extra, env_extra=env)
    check_output(run, p, inputs)
    no_errors(run)
    assert run.stats["graph_split_plans"] == 1 and run.stats["graph_over_limit"] == 0, run.stats
    assert run.report["workspace"] <= limit, run.report
    assert f"at N=11 under {limit} B: 3 micro-batch(es)" in run.stderr, run.stderr  # 4 + 4 + 3
