"""Random convolution calls, good and bad, on the host backend alone and under the preload library (its defaults,
and an explicit 16 KiB limit under which it micro-batches): the contract's rules for executions, call by call.

- What cuDNN runs, the preload library runs, with cuDNN's result (within float rounding: a micro-batched plan
  sums in another order).
- What cuDNN refuses, it refuses with cuDNN's status -- a wrong algorithm for the op, an algorithm the problem
  does not take, descriptors that do not agree, a tensor descriptor where the filter's belongs, a NULL data or
  convolution descriptor -- except a call whose only fault is a workspace too small for its algorithm, which a
  plan within that workspace may serve (docs/contract.md): then with the result the call would have had with the
  workspace it asked for.
- The process lives through all of it.

exec_fuzz_probe.py runs the calls; UCUDNN_TEST_EXEC_FUZZ_SEED and UCUDNN_TEST_EXEC_FUZZ_CASES draw others or more.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._env import project_pythonpath, run_case_probe

from .conftest import base_env

SEED = int(os.environ.get("UCUDNN_TEST_EXEC_FUZZ_SEED", "20261127"))
COUNT = int(os.environ.get("UCUDNN_TEST_EXEC_FUZZ_CASES", "400"))
# Algorithm enums of each op; every one is drawn, most of them the ones that take any problem.
ALGOS = {0: [0, 1, 2, 4, 5, 6, 7], 1: [0, 1, 2, 3, 4, 5], 2: [0, 1, 2, 3, 4, 5, 6]}
GENERAL = {0: [0, 1, 2], 1: [0, 1], 2: [0, 1, 3]}


def draw(r: random.Random) -> dict[str, Any]:
    op = r.choice([0, 1, 2])
    algo = r.choice(GENERAL[op]) if r.random() < 0.7 else r.choice([*ALGOS[op], -1, 100])
    return {"op": op, "n": r.randint(1, 8), "c": r.choice([1, 2, 3, 4]), "k": r.choice([2, 4, 6]),
            "size": r.randint(3, 9), "filt": r.choice([1, 3]), "pad": r.choice([0, 1]), "stride": r.choice([1, 2]),
            "algo": algo, "ws": r.choice(["null", "exact", "exact", "exact", "short", "big"]),
            "alpha": r.choice([1.0, 0.5]), "beta": r.choice([0.0, 0.0, 0.5]),
            "bad": r.choice([None] * 12 + ["y_shape", "w_kind", "x_null", "conv_null"])}  # fmt: skip


def _run(host_lib: Path, cases: list[dict[str, Any]], env: dict[str, str] | None, tmp: Path) -> list[dict[str, Any]]:
    full = base_env()
    del full["UCUDNN_VERIFY_SAMPLES"]  # the library's own default: new plans checked on real executions
    full["UCUDNN_DATABASE"] = str(tmp / "cache.sqlite")
    full["PYTHONPATH"] = project_pythonpath(full)
    full |= env or {}
    return run_case_probe("tests.preload.exec_fuzz_probe", host_lib, cases, env=full)


@pytest.fixture(scope="module")
def cases() -> list[dict[str, Any]]:
    r = random.Random(SEED)
    return [draw(r) for _ in range(COUNT)]


@pytest.fixture(scope="module")
def alone(host_lib: Path, cases: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
          ) -> list[dict[str, Any]]:  # fmt: skip
    return _run(host_lib, cases, None, tmp_path_factory.mktemp("alone"))


def test_the_cases_hold_both_kinds_of_call(alone: list[dict[str, Any]]) -> None:
    ran = sum(1 for a in alone if a["status"] == 0)
    assert COUNT // 5 < ran < COUNT - COUNT // 5
    assert sum(1 for a in alone if "ref" in a) > COUNT // 50  # calls short of workspace only


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and bool(np.allclose(a, b, rtol=1e-3, atol=1e-3))


@pytest.mark.parametrize("limit", [None, "16KiB"], ids=["defaults", "limit-16KiB"])
def test_the_preload_library_keeps_every_answer_the_contract_keeps(
    host_lib: Path, preload_lib: Path, cases: list[dict[str, Any]], alone: list[dict[str, Any]],
    tmp_path: Path, limit: str | None,
) -> None:  # fmt: skip
    stats_file = tmp_path / "stats.json"
    env = {"LD_PRELOAD": str(preload_lib), "UCUDNN_STATS_FILE": str(stats_file)}
    env |= {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": limit} if limit else {}
    under = _run(host_lib, cases, env, tmp_path)
    stats = json.loads(stats_file.read_text())
    assert stats["calls"] > 0 and (not limit or stats["micro_batches"] > stats["planned"] > 0), stats
    wrong, served = [], 0
    for i, (case, a, b) in enumerate(zip(cases, alone, under, strict=True)):
        if a["status"] == 0:
            ok = b["status"] == 0 and _close(b["out"], a["out"])
        elif b["status"] == 0 and "ref" in a:  # served within a workspace too small for the algorithm
            ok = _close(b["out"], a["ref"])
            served += 1
        else:
            ok = b["status"] == a["status"]
        if not ok:
            wrong.append(f"case {i} {json.dumps(case)}: alone {a['status']}, under ucudnn {b['status']}")
    assert not wrong, f"seed {SEED}: " + "\n".join(wrong[:5])
    assert served <= sum(1 for a in alone if "ref" in a)
