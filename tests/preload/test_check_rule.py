"""The rule that decides a check of a new micro-batched plan (uc_trial, shim/core/uc_trial.c), fed with chosen
timings by tests/preload/c/trial_probe.c: a plan is kept only when it wins clearly and consistently.

Was: the medians of S = 3 timings per side decided, so on a busy machine a plan slower than the undivided choice
could win one lucky median and be kept for good ("a check too short for its noise": a single-problem 64 MiB
run kept a plan at 0.854x).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import C_DIR, ROOT, compile_c


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bin") / "trial_probe"
    return compile_c(C_DIR / "trial_probe.c", ROOT / "shim" / "core" / "uc_trial.c", output=out, link_cudnn=False,
                     extra=("-I", str(ROOT / "shim"), "-I", str(ROOT / "shim" / "core"), "-lm"))  # fmt: skip


def decide(probe: Path, times: list[float | str], samples: int = 3, margin: float = 0.02) -> dict[str, int]:
    proc = subprocess.run([str(probe), str(samples), str(margin), *map(str, times)], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    result: dict[str, int] = json.loads(proc.stdout)
    return result


def pairs(*ratios: float) -> list[float | str]:
    """Warm-ups, then one (plan, undivided) pair per ratio, the undivided side taking 10 ms."""
    return [5.0, 5.0, *(x for r in ratios for x in (10.0 * r, 10.0))]


def test_a_plan_faster_in_every_pair_is_kept_after_s_pairs(probe: Path) -> None:
    assert decide(probe, pairs(0.8, 0.9, 0.85)) == {"executions": 8, "kept": 1, "samples": 3}


def test_a_plan_not_clearly_faster_is_replaced_after_s_pairs(probe: Path) -> None:
    assert decide(probe, pairs(0.99, 0.8, 1.2)) == {"executions": 8, "kept": 0, "samples": 3}  # median 0.99
    assert decide(probe, pairs(1.0, 1.0, 1.0)) == {"executions": 8, "kept": 0, "samples": 3}  # a tie


def test_pairs_that_disagree_take_s_more_pairs_before_anything_is_kept(probe: Path) -> None:
    # The medians alone keep this plan (plan 8, 8, 12 ms against 10, 10, 10 ms): one pair says it is slower.
    noisy = pairs(0.8, 0.8, 1.2)
    assert decide(probe, noisy + pairs(1.1, 1.1, 0.8)[2:]) == {"executions": 14, "kept": 0, "samples": 6}
    assert decide(probe, noisy + pairs(0.8, 0.9, 0.85)[2:]) == {"executions": 14, "kept": 1, "samples": 6}


def test_a_side_that_fails_never_wins(probe: Path) -> None:
    warm: list[float | str] = [5.0, 5.0]
    plan_fails: list[float | str] = ["fail", 10.0]
    base_fails: list[float | str] = [10.0, "fail"]
    assert decide(probe, [*warm, *plan_fails * 3]) == {"executions": 8, "kept": 0, "samples": 3}
    assert decide(probe, [*warm, *base_fails * 3]) == {"executions": 8, "kept": 1, "samples": 3}
