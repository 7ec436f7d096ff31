"""The shim's descriptor reading and cloning against the real libcudnn.so.9 from the nvidia-cudnn wheel.

No GPU is needed: descriptor calls work without one. Each run is a fresh process (probe.py) so that the real
library and the host backend, which share the soname libcudnn.so.9, never meet in one process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._env import real_client_missing
from tests.conftest import REAL_CUDNN_INSTALL
from ucudnn import _paths

pytestmark = pytest.mark.realcudnn

PROBE = Path(__file__).with_name("probe.py")
DTYPES = {0: "float", 1: "double", 2: "half", 9: "bfloat16"}
FORMATS = {0: "nchw", 1: "nhwc"}
MATHS = {0: "default", 1: "tensor_op", 2: "tensor_op_allow_conversion", 3: "fma"}


# A libcudnn.so.9 to test instead of the wheel's on sys.path: another release (`.ci/run` runs this tier a second time
# on the one the pinned torch ships), in a folder laid out as the wheel's (lib/ beside include/).
REAL_CUDNN_VAR = "UCUDNN_TEST_REAL_CUDNN"


def _real_libcudnn() -> Path:
    named = os.environ.get(REAL_CUDNN_VAR)
    if named:
        if not Path(named).is_file():
            pytest.fail(f"{REAL_CUDNN_VAR}={named}: no such file", pytrace=False)
        return Path(named)
    searched = []
    for entry in sys.path:
        candidate = Path(entry or ".") / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
        searched.append(str(candidate))
        if candidate.exists():
            return candidate
    real_client_missing(
        f"the real libcudnn.so.9 was not found ({REAL_CUDNN_INSTALL}); searched: " + ", ".join(searched)
    )


def _probe(specs: list[dict[str, Any]]) -> dict[str, Any]:
    if not _paths.PRELOAD.exists():
        pytest.fail(f"libucudnn.so not built at {_paths.PRELOAD}")
    real = _real_libcudnn()
    proc = subprocess.run(
        [sys.executable, str(PROBE), str(real), str(_paths.PRELOAD)],
        input=json.dumps(specs),
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _tensor_text(name: str, t: dict[str, Any]) -> str:
    dims, strides = t["dims"], t["strides"]
    span = 1 + sum((d - 1) * s for d, s in zip(dims[1:], strides[1:], strict=True))
    n_stride = "*" if strides[0] == span else str(strides[0])
    return f"{name}={','.join(map(str, dims[1:]))}/{n_stride},{','.join(map(str, strides[1:]))}"


def expected_key(op: str, r: dict[str, Any]) -> str:
    """The documented key format, built from what the real getters report."""
    w = r["w"]
    return ";".join(
        [
            f"op={op}",
            f"dtype={DTYPES[r['x']['dtype']]}",
            _tensor_text("x", r["x"]),
            f"w={DTYPES[w['dtype']]},{FORMATS[w['format']]},{','.join(map(str, w['dims']))}",
            _tensor_text("y", r["y"]),
            "pad=" + ",".join(map(str, r["pad"])),
            "stride=" + ",".join(map(str, r["stride"])),
            "dilation=" + ",".join(map(str, r["dil"])),
            "mode=" + ("cross_correlation" if r["mode"] else "convolution"),
            f"compute={DTYPES[r['compute']]}",
            f"groups={r['groups']}",
            f"math={MATHS[r['math']]}",
        ]
    )


BASE: dict[str, Any] = {
    "op": "fwd",
    "dtype": 0,
    "nhwc": False,
    "n": 8,
    "c": 3,
    "k": 16,
    "spatial": [32, 32],
    "filt": [3, 3],
    "pad": [1, 1],
    "stride": [1, 1],
    "dil": [1, 1],
    "mode": 1,
    "groups": 1,
    "math": 0,
    "clone_at": [1, 3],
}
SPECS: list[dict[str, Any]] = [
    BASE,
    BASE | {"nhwc": True, "c": 8, "k": 12, "groups": 2, "dil": [2, 2], "stride": [2, 1], "math": 1, "op": "bwd_data"},
    BASE
    | {
        "dtype": 1,
        "spatial": [6, 10, 12],
        "filt": [3, 1, 5],
        "pad": [1, 0, 2],
        "stride": [1, 1, 2],
        "dil": [1, 1, 1],
        "mode": 0,
        "op": "bwd_filter",
        "n": 5,
    },
    BASE | {"n_pad": 7},  # samples not packed: nStride is part of the key
    BASE | {"dtype": 2, "op": "bwd_filter"},  # HALF data, FLOAT compute (mixed precision): planned like FLOAT
    BASE | {"dtype": 9, "nhwc": True, "op": "bwd_data"},  # BFLOAT16, FLOAT compute
    BASE | {"dtype": 2, "compute": 2, "math": 1},  # HALF with HALF compute ("true half"), tensor-op math
    BASE | {"dtype": 3, "nhwc": True, "c": 4, "k": 4, "compute": 4},  # INT8 (INT32 compute): not planned
]
PLANNED = range(7)


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    return _probe(SPECS)


def test_shim_forwards_to_the_wheel(probe: dict[str, Any]) -> None:
    stats = probe["stats"]
    assert "nvidia/cudnn/lib/libcudnn.so.9" in stats["real_library"]
    assert stats["real_version"] == probe["version"] >= 90000


def test_key_of_a_plain_layer(probe: dict[str, Any]) -> None:
    assert probe["cases"][0]["key"] == (
        "op=fwd;dtype=float;x=3,32,32/*,1024,32,1;w=float,nchw,16,3,3,3;y=16,32,32/*,1024,32,1;pad=1,1;stride=1,1;"
        "dilation=1,1;mode=cross_correlation;compute=float;groups=1;math=default"
    )


@pytest.mark.parametrize("index", PLANNED)
def test_key_agrees_with_real_getters(probe: dict[str, Any], index: int) -> None:
    case = probe["cases"][index]
    assert case["need"] == len(case["key"])
    assert case["key"] == expected_key(SPECS[index]["op"], case["reported"])


def test_unpacked_n_stride_is_in_the_key(probe: dict[str, Any]) -> None:
    assert "x=3,32,32/3079,1024,32,1" in probe["cases"][3]["key"]


def test_16bit_keys(probe: dict[str, Any]) -> None:
    half, bf16, true_half = (probe["cases"][i]["key"] for i in (4, 5, 6))
    assert half.startswith("op=bwd_filter;dtype=half;") and ";w=half,nchw," in half and ";compute=float;" in half
    assert bf16.startswith("op=bwd_data;dtype=bfloat16;") and ";w=bfloat16,nhwc," in bf16
    assert ";compute=float;" in bf16
    assert ";compute=half;" in true_half and true_half.endswith(";math=tensor_op")


def test_int8_is_not_planned(probe: dict[str, Any]) -> None:
    assert probe["cases"][7]["key"] is None and probe["cases"][7]["need"] == 0


@pytest.mark.parametrize("index", range(len(SPECS)))
def test_clones_keep_strides(probe: dict[str, Any], index: int) -> None:
    case = probe["cases"][index]
    original = case["x"]
    for b, clone in case["clones"].items():
        assert clone["status"] == 0
        assert clone["dtype"] == original["dtype"]
        assert clone["dims"] == [int(b), *original["dims"][1:]]
        assert clone["strides"] == original["strides"]  # nStride unchanged: a view into the caller's tensor
