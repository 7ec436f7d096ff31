"""Random descriptor sequences against NVIDIA's libcudnn.so.9 (no GPU: the stand-ins of conftest.py), the host
backend, and the real library under the preload library: every status and every value read back must agree.

The sequences (_fuzz_cases.py) start from what cudnn_frontend builds -- tensors, convolutions, pointwise
descriptors, convolution and pointwise operations, an operation's graph -- and mutate it: attributes dropped, set
twice, with another type, count or values, foreign attributes, parts missing, swapped or never finalized, Sets
and Finalizes after Finalize, reads of every kind. They found what test_status_parity.py's hand-written sequences
had not: the real library's tensor alignment default, vector-count and by-value rules, a convolution mode read
back as a data type, conv-operation scaling factors kept as doubles (a backward filter's alpha read in its beta's
type), pointwise operations that finalize without their descriptor or with unfinalized parts, overlapping strides
refused by convolution operations, graphs whose operation writes what it reads; the host backend now answers all
of them as the real library does (docs/host-backend.md).

UCUDNN_TEST_FUZZ_SEED and UCUDNN_TEST_FUZZ_CASES run other or more sequences (each case costs well under a
millisecond); a failure names the seed and the case, and `python -m tests.realcudnn.fuzz_probe LIB < cases.json`
replays one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._env import ROOT
from ucudnn import _paths

from ._fuzz_cases import cases
from .conftest import probe_env
from .test_descriptors import _real_libcudnn

pytestmark = pytest.mark.realcudnn

SEED = int(os.environ.get("UCUDNN_TEST_FUZZ_SEED", "20261127"))
COUNT = int(os.environ.get("UCUDNN_TEST_FUZZ_CASES", "3000"))


def _run(lib: Path, batch: list[dict[str, Any]], *, standins: Path | None = None, preload: bool = False
         ) -> list[Any]:  # fmt: skip
    env = probe_env(standins=standins, preload=preload)
    proc = subprocess.run([sys.executable, "-m", "tests.realcudnn.fuzz_probe", str(lib)], input=json.dumps(batch),
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(batch)
    return [json.loads(line) for line in lines]


def _differences(batch: list[dict[str, Any]], want: list[Any], got: list[Any], shown: int = 5) -> list[str]:
    out = []
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        if a == b:
            continue
        case = batch[i]
        steps = [*case.get("parts", []), case]
        part = next(k for k in range(len(a)) if a[k] != b[k])
        step = next(k for k in range(len(a[part])) if a[part][k] != b[part][k])
        call = (["create"] + steps[part]["steps"])[step]
        out.append(f"seed {SEED} case {i}: descriptor {part} (type {steps[part]['kind']}), {call}: real "
                   f"{a[part][step]}, other {b[part][step]}; case {json.dumps(case)}")  # fmt: skip
    return out[:shown] + ([f"... {len(out) - shown} more"] if len(out) > shown else [])


@pytest.fixture(scope="module")
def batch() -> list[dict[str, Any]]:
    return cases(SEED, COUNT)


@pytest.fixture(scope="module")
def real(batch: list[dict[str, Any]], standin_dir: Path) -> list[Any]:
    return _run(_real_libcudnn(), batch, standins=standin_dir)


def test_the_cases_reach_past_creation(batch: list[dict[str, Any]], real: list[Any]) -> None:
    """Not a run of refusals: most descriptors finalize, and every kind of call appears."""
    finalized = sum(
        1
        for case, result in zip(batch, real, strict=True)
        for step, status in zip(["create", *case["steps"]], result[-1], strict=True)
        if step == ["finalize"] and status == 0
    )
    assert finalized > COUNT // 3
    kinds = {case["kind"] for case in batch}
    assert len(kinds) == 8  # tensor, convolution, pointwise, the three convolution operations, pointwise op, graph


def test_the_host_backend_answers_as_the_real_library(batch: list[dict[str, Any]], real: list[Any]) -> None:
    host = _run(_paths.HOST_CUDNN, batch)
    assert not _differences(batch, real, host), "\n".join(_differences(batch, real, host))


def test_the_preload_library_changes_nothing_the_real_library_answers(
    batch: list[dict[str, Any]], real: list[Any], standin_dir: Path
) -> None:
    hooked = _run(_real_libcudnn(), batch, standins=standin_dir, preload=True)
    assert not _differences(batch, real, hooked), "\n".join(_differences(batch, real, hooked))
