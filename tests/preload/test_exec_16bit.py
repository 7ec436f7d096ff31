"""HALF and BFLOAT16 convolutions micro-batched by the preload library, against the undivided call.

The driver (c/conv16_driver.c) sets up a mixed-precision layer the way frameworks do -- 16-bit tensors and
filter, a FLOAT compute type (or HALF: "true half"), float scaling factors -- and either registers a C planner
with a fixed plan (so what runs is known exactly) or leaves planning to the embedded Python planner. The
reference is the same program without LD_PRELOAD. What the results must satisfy, with u the unit roundoff of the
16-bit type (2**-11 for HALF, 2**-8 for BFLOAT16):

* Forward, BackwardData, bias-activation with the same deterministic algorithm in every micro-batch: bitwise
  equal. Samples are independent and every algorithm computes a sample the same way whatever the batch.
* Different algorithms per micro-batch: each result is one rounding of a float sum that differs from the
  reference's only in summation order, so |got - ref| <= 2u |ref| + (float noise).
* BackwardFilter: dw sums over samples, so micro-batch i > 0 accumulates (beta = 1.0f) onto the 16-bit dw the
  previous one stored: dw is rounded once per micro-batch instead of once. With m micro-batches
  |got - ref| <= (m + 1) u M, M the magnitude of the partial sums, bounded here by max |ref| (random data whose
  partial sums stay within the result's range).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ucudnn import _paths
from ucudnn.cudnn import bf16_to_float

from .conftest import base_env, compile_driver

UNIT_ROUNDOFF = {"half": 2.0**-11, "bf16": 2.0**-8}
DTYPES = ["half", "bf16"]


@pytest.fixture(scope="session")
def conv16_driver(host_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver("conv16_driver", tmp_path_factory)


class Result:
    def __init__(self, report: dict[str, Any], stderr: str, returncode: int, output: Path) -> None:
        self.report, self.stderr, self.returncode, self.path = report, stderr, returncode, output

    @property
    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.report["stats"]
        return stats

    def raw(self) -> npt.NDArray[np.uint16]:
        return np.fromfile(self.path, dtype=np.uint16)

    def values(self, dtype: str) -> npt.NDArray[np.float64]:
        bits = self.raw()
        vals = bits.view(np.float16) if dtype == "half" else bf16_to_float(bits)
        return vals.astype(np.float64)


Run16 = Callable[..., Result]


@pytest.fixture
def run16(conv16_driver: Path, preload_lib: Path, tmp_path: Path) -> Run16:
    counter = iter(range(1000))

    def run(*args: str, preload: bool = True, env: dict[str, str] | None = None) -> Result:
        out = tmp_path / f"out{next(counter)}"
        full_env = base_env()
        full_env["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
        if preload:
            full_env["LD_PRELOAD"] = str(preload_lib)
        full_env.update(env or {})
        proc = subprocess.run(
            [str(conv16_driver), *args, f"out={out}"], env=full_env, capture_output=True, text=True, timeout=120
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        assert lines, f"driver printed no report; rc={proc.returncode} stderr={proc.stderr}"
        return Result(json.loads(lines[-1]), proc.stderr, proc.returncode, Path(f"{out}.0"))

    return run


def for_dtype(dtype: str, extra: list[str]) -> list[str]:
    """BFLOAT16 has no HALF compute configuration (cuDNN computes it in FLOAT): drop ``compute=half`` for it."""
    return [e for e in extra if not (dtype == "bf16" and e == "compute=half")]


def micro_batched(run16: Run16, args: list[str], plan: str) -> Result:
    got = run16(*args, "planner=fixed", f"plan={plan}")
    assert got.returncode == 0, got.stderr
    stats = got.stats
    assert stats["rejected_plans"] == 0 and stats["passthrough"] == 0, got.stderr
    assert stats["calls"] == 1 and stats["planned"] == 1
    assert stats["micro_batches"] == plan.count(",") + 1 > 1  # really divided
    assert [(m["batch"], m["algo"]) for m in got.report["last_plan"]["micro_batches"]] == [
        tuple(int(v) for v in mb.split(":")[:2]) for mb in plan.split(",")
    ]
    return got


def undivided(run16: Run16, args: list[str]) -> Result:
    ref = run16(*args, preload=False)
    assert ref.returncode == 0, ref.stderr
    return ref


# op, algorithm (the reference's and every micro-batch's), extra driver arguments
SAME_ALGO = [
    ("fwd", 0, []),
    ("fwd", 1, ["beta=0.5", "layout=nhwc"]),
    ("fwd", 2, ["groups=2", "c=4", "k=6", "dil=2", "pad=2"]),
    ("fwd", 2, ["compute=half", "alpha=0.75", "beta=-1"]),
    ("fwd", 7, ["beta=0.25"]),
    ("fwd", 1, ["in=4,6,6", "filt=3,3,3", "stride=2"]),
    ("bwd_data", 1, []),
    ("bwd_data", 1, ["beta=0.5", "layout=nhwc", "groups=2"]),
    ("bwd_data", 5, ["compute=half"]),
    ("bwd_data", 1, ["in=4,6,6", "filt=3,3,3", "dil=2", "pad=2"]),
    ("biasact", 1, ["alpha2=0.5"]),
    ("biasact", 2, ["layout=nhwc", "alpha2=0"]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("op", "algo", "extra"), SAME_ALGO, ids=lambda v: v if isinstance(v, str) else str(v))
def test_same_algorithm_is_bitwise_equal(run16: Run16, dtype: str, op: str, algo: int, extra: list[str]) -> None:
    args = [f"op={op}", f"dtype={dtype}", "n=8", "ws=4000000", f"algo={algo}", *for_dtype(dtype, extra)]
    ref = undivided(run16, args)
    got = micro_batched(run16, args, f"3:{algo},2:{algo},3:{algo}")
    assert np.array_equal(got.raw(), ref.raw())
    assert np.all(np.isfinite(got.values(dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("op", "plan", "algo", "extra"),
    [
        ("fwd", "3:0,2:1,3:2", 0, ["beta=0.5"]),
        ("bwd_data", "4:1,4:5", 1, []),
        ("biasact", "2:2,6:0", 0, ["layout=nhwc"]),
    ],
)
def test_mixed_algorithms_within_two_roundings(
    run16: Run16, dtype: str, op: str, plan: str, algo: int, extra: list[str]
) -> None:
    args = [f"op={op}", f"dtype={dtype}", "n=8", "ws=4000000", f"algo={algo}", *extra]
    ref = undivided(run16, args).values(dtype)
    got = micro_batched(run16, args, plan).values(dtype)
    u = UNIT_ROUNDOFF[dtype]
    np.testing.assert_allclose(got, ref, rtol=2 * u, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.parametrize("dtype", DTYPES)
def test_atomics_algorithm_in_a_plan(run16: Run16, dtype: str) -> None:
    """BackwardData ALGO_0 adds its 4 partial sums into the 16-bit dx with atomics, rounding the running sum each
    time (after the beta scaling): up to 5 roundings of values of the running sum's magnitude, so against a
    single-rounded reference |got - ref| <= 6 u max|ref|."""
    args = ["op=bwd_data", f"dtype={dtype}", "n=8", "ws=4000000", "beta=0.5"]
    ref = undivided(run16, [*args, "algo=1"]).values(dtype)
    # The caller runs the non-deterministic ALGO_0 itself: a plan with it is then allowed (the shim checks
    # determinism with the real library, and the caller's algorithm says whether it is asked for).
    got = micro_batched(run16, [*args, "algo=0"], "4:0,4:1").values(dtype)
    bound = 6 * UNIT_ROUNDOFF[dtype] * float(np.abs(ref).max())
    assert float(np.abs(got - ref).max()) <= bound


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("plan", "algo", "extra"),
    [
        ("3:1,2:1,3:1", 1, []),
        ("3:3,2:3,3:3", 3, ["beta=0.5"]),
        ("1:1,1:3,6:1", 1, ["beta=1", "layout=nhwc"]),
        ("2:3,2:3,2:3,2:3", 3, ["groups=2", "dil=2", "beta=0.75", "compute=half"]),
        ("4:1,4:3", 1, ["in=4,6,6", "filt=3,3,3"]),
    ],
)
def test_backward_filter_accumulation_rounds_per_micro_batch(
    run16: Run16, dtype: str, plan: str, algo: int, extra: list[str]
) -> None:
    args = ["op=bwd_filter", f"dtype={dtype}", "n=8", "ws=4000000", f"algo={algo}", *for_dtype(dtype, extra)]
    ref = undivided(run16, args).values(dtype)
    got = micro_batched(run16, args, plan).values(dtype)
    m = plan.count(",") + 1
    bound = (m + 1) * UNIT_ROUNDOFF[dtype] * float(np.abs(ref).max())
    err = float(np.abs(got - ref).max())
    assert err <= bound, f"max |got - ref| {err:.3g} > (m + 1) u max|ref| = {bound:.3g}"


def test_one_micro_batch_backward_filter_is_bitwise(run16: Run16) -> None:
    """With a single micro-batch there is no extra rounding: the shim's call is the caller's call."""
    args = ["op=bwd_filter", "dtype=half", "n=8", "ws=4000000", "algo=1", "beta=0.5"]
    ref = undivided(run16, args)
    got = run16(*args, "planner=fixed", "plan=8:1")
    assert got.returncode == 0 and got.stats["planned"] == 1 and got.stats["micro_batches"] == 1
    assert np.array_equal(got.raw(), ref.raw())


# Big enough that the modelled GEMM at N=8 beats the implicit algorithms at N=16, with a limit that fits GEMM's
# workspace (float im2col plus the 16-bit path's float filter copy and staging tile) only at N=8: the real
# planner must split.
LAYER = ["n=16", "c=32", "k=64", "in=16,16", "query=get"]
LIMIT = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["fwd", "bwd_data"])
def test_embedded_planner_micro_batches_16bit(run16: Run16, dtype: str, op: str) -> None:
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail(f"embedded planner not built at {_paths.EMBEDDED_PLANNER}")
    args = [f"op={op}", f"dtype={dtype}", *LAYER]
    ref = run16(*args, preload=False)
    got = run16(*args, "repeat=2", env=LIMIT)
    assert got.returncode == 0, got.stderr
    stats = got.stats
    assert stats["planner_calls"] >= 1 and stats["fallback_plans"] == 0 and stats["rejected_plans"] == 0
    assert stats["planned"] == 2 and stats["micro_batches"] > stats["planned"]
    plan = got.report["last_plan"]
    assert plan["source"] == "planner" and plan["workspace_bytes"] <= 2500 * 1024
    assert sum(m["batch"] for m in plan["micro_batches"]) == 16
    # The undivided reference ran the query's choice; the plan may use other algorithms: two roundings.
    r, g = ref.values(dtype), got.values(dtype)
    np.testing.assert_allclose(g, r, rtol=2 * UNIT_ROUNDOFF[dtype], atol=1e-5 * float(np.abs(r).max()))


def test_int8_still_passes_through(run16: Run16) -> None:
    """A data type the shim does not plan (INT8) is forwarded unchanged, with the real library's answer."""
    args = ["op=fwd", "dtype=int8", "n=8", "ws=0", "layout=nhwc", "c=4", "k=4"]
    ref = run16(*args, preload=False)
    got = run16(*args, "planner=fixed", "plan=4:0,4:0")
    assert got.returncode == ref.returncode
    assert got.stderr.replace("conv16_driver", "") == ref.stderr.replace("conv16_driver", "")
    assert got.stats["passthrough"] == 1 and got.stats["planner_calls"] == 0
