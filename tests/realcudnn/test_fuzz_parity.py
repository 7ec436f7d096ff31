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
from pathlib import Path
from typing import Any

import pytest

from tests._env import run_case_probe
from ucudnn import _paths

from ._fuzz_cases import cases, legacy_cases
from .conftest import probe_env
from .test_descriptors import _real_libcudnn

pytestmark = pytest.mark.realcudnn

SEED = int(os.environ.get("UCUDNN_TEST_FUZZ_SEED", "20261127"))
COUNT = int(os.environ.get("UCUDNN_TEST_FUZZ_CASES", "3000"))


def _run(lib: Path, batch: list[Any], *, standins: Path | None = None, preload: bool = False,
         probe: str = "fuzz_probe", args: tuple[str, ...] = ()) -> list[Any]:  # fmt: skip
    return run_case_probe(
        f"tests.realcudnn.{probe}", lib, batch, *args, env=probe_env(standins=standins, preload=preload)
    )


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
    differences = _differences(batch, real, _run(_paths.HOST_CUDNN, batch))
    assert not differences, "\n".join(differences)


def test_the_preload_library_changes_nothing_the_real_library_answers(
    batch: list[dict[str, Any]], real: list[Any], standin_dir: Path
) -> None:
    differences = _differences(batch, real, _run(_real_libcudnn(), batch, standins=standin_dir, preload=True))
    assert not differences, "\n".join(differences)


# ---- the legacy API's descriptors: one tensor, filter and convolution per case (legacy_fuzz_probe.py) ----


def _legacy_differences(batch: list[Any], want: list[Any], got: list[Any], shown: int = 5) -> list[str]:
    out = []
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        if a != b:
            k = next(j for j in range(len(a)) if a[j] != b[j])
            call = (["create tensor", "create filter", "create convolution"] + batch[i])[k]
            out.append(f"seed {SEED} legacy case {i}: {call}: real {a[k]}, host {b[k]}; case {json.dumps(batch[i])}")
    return out[:shown] + ([f"... {len(out) - shown} more"] if len(out) > shown else [])


@pytest.fixture(scope="module")
def legacy_batch() -> list[Any]:
    return legacy_cases(SEED, COUNT)


def test_legacy_descriptors_answer_as_the_real_library(legacy_batch: list[Any], standin_dir: Path) -> None:
    """Setters' statuses, and everything the getters read back (the output dimensions and sizes included) until a
    Set is refused: what a descriptor holds after that is each library's own."""
    real = _run(_real_libcudnn(), legacy_batch, standins=standin_dir, probe="legacy_fuzz_probe")
    host = _run(_paths.HOST_CUDNN, legacy_batch, probe="legacy_fuzz_probe")
    refused = sum(1 for result in real if None in result)
    assert COUNT // 10 < refused < COUNT - COUNT // 10  # both refused and accepted sequences are compared
    differences = _legacy_differences(legacy_batch, real, host)
    assert not differences, "\n".join(differences)


def test_the_host_backend_survives_every_read_after_a_refused_set(legacy_batch: list[Any]) -> None:
    """Where the real library divides by a zero it was refused but kept (a stride, a vector width), the host
    backend answers: every getter after every refused Set, and the process lives."""
    results = _run(_paths.HOST_CUDNN, legacy_batch, probe="legacy_fuzz_probe", args=("all",))
    assert all(None not in result for result in results)
