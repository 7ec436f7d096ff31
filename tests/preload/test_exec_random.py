"""Micro-batched execution against the undivided call on random problems and random plans.

test_exec.py pins fifteen chosen cases; this draws the problem (op, batch, channels, groups, 2-D or 3-D extents,
filter, padding, stride, dilation, layout, data type, beta) and the plan (a random split of the batch into up to
five micro-batches, each with an algorithm the op has for any problem) from a seed. Each case runs the C driver
without the preload library (the reference) and under it with the fixed plan: the plan must be executed as given
and the output must match. UCUDNN_TEST_EXEC_SEED and UCUDNN_TEST_EXEC_CASES draw others or more.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from .conftest import RunDriver, assert_close

SEED = int(os.environ.get("UCUDNN_TEST_EXEC_SEED", "20261127"))
COUNT = int(os.environ.get("UCUDNN_TEST_EXEC_CASES", "60"))
# Algorithms of each op that take any problem (Winograd and FFT are limited to some filters and strides).
GENERAL_ALGOS = {"fwd": [0, 1, 2], "bwd_data": [0, 1], "bwd_filter": [0, 1, 3], "biasact": [0, 1, 2]}


def draw(r: random.Random) -> tuple[str, list[str], str]:
    op = r.choice(list(GENERAL_ALGOS))
    groups = r.choice([1, 1, 2])
    n = r.randint(2, 9)
    nsp = r.choice([2, 2, 3])
    filt = [r.choice([1, 2, 3]) for _ in range(nsp)]
    pad, stride, dil = r.choice([0, 1, 2]), r.choice([1, 1, 2]), r.choice([1, 1, 2])
    extent = [max(r.randint(3, 9), (f - 1) * dil + 1) for f in filt]  # every output extent at least 1
    args = [f"op={op}", f"n={n}", f"c={groups * r.choice([1, 2, 3])}", f"k={groups * r.choice([1, 2, 4])}",
            f"groups={groups}", "in=" + ",".join(map(str, extent)), "filt=" + ",".join(map(str, filt)),
            f"pad={pad}", f"stride={stride}", f"dil={dil}", f"layout={r.choice(['nchw', 'nhwc'])}",
            f"dtype={r.choice(['float', 'double'])}", f"beta={r.choice([0, 0.5, 1])}", "ws=16000000"]  # fmt: skip
    if op == "biasact":
        args.append(f"alpha2={r.choice([0, 0.5])}")
    cuts = sorted(r.sample(range(1, n), min(n - 1, r.randint(1, 4))))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    plan = ",".join(f"{b}:{r.choice(GENERAL_ALGOS[op])}" for b in sizes)
    return op, args, plan


CASES = [draw(random.Random(SEED * 1000 + i)) for i in range(COUNT)]


@pytest.mark.parametrize(("op", "args", "plan"), CASES, ids=[f"{SEED}-{i}" for i in range(COUNT)])
def test_a_random_plan_computes_the_undivided_result(run_driver: RunDriver, op: str, args: list[str], plan: str
                                                     ) -> None:  # fmt: skip
    ref = run_driver(*args, preload=False)
    assert ref.returncode == 0, ref.stderr
    got = run_driver(*args, "planner=fixed", f"plan={plan}")
    assert got.returncode == 0, got.stderr
    stats: dict[str, Any] = got.report["stats"]
    assert stats["rejected_plans"] == 0, got.stderr
    assert stats["calls"] == 1 and stats["planned"] == 1
    assert [(m["batch"], m["algo"]) for m in got.report["last_plan"]["micro_batches"]] == [
        tuple(int(v) for v in mb.split(":")) for mb in plan.split(",")
    ]
    dtype = "double" if "dtype=double" in args else "float"
    assert_close(got.output(dtype), ref.output(dtype), dtype)
