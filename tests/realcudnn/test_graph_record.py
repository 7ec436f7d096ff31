"""The graph-API hooks against the real libcudnn.so.9 (no GPU needed for these descriptor calls): every status is
the real library's, the shim records what the framework builds and forgets it on destroy, and the enum values
the shim reads are cuDNN's own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._env import ROOT, real_client_missing
from tests.conftest import REAL_CUDNN_INSTALL
from ucudnn import _paths

from .test_descriptors import _real_libcudnn

pytestmark = pytest.mark.realcudnn

UC_GRAPH_H = Path(__file__).resolve().parents[2] / "shim" / "graph" / "uc_graph.h"

# The shim's names for cuDNN's enum values (shim/graph/uc_graph.h), by prefix.
PREFIXES = {
    "UC_BK_OP_": "CUDNN_BACKEND_OPERATION_",
    "UC_BK_": "CUDNN_BACKEND_",
    "UC_AT_": "CUDNN_TYPE_",
    "UC_A_OP_PW_": "CUDNN_ATTR_OPERATION_POINTWISE_",
    "UC_A_OP_FWD_": "CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_",
    "UC_A_OP_BWD_DATA_": "CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_",
    "UC_A_OP_BWD_FILTER_": "CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_",
    "UC_A_CONV_": "CUDNN_ATTR_CONVOLUTION_",
    "UC_A_PLAN_": "CUDNN_ATTR_EXECUTION_PLAN_",
    "UC_A_": "CUDNN_ATTR_",
    "UC_PW_": "CUDNN_POINTWISE_",
}
# Where the shim's shorter name is not the header's name with the prefix swapped.
RENAMED = {
    "UC_BK_OP_CONV_FWD": "CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR",
    "UC_BK_OP_CONV_BWD_FILTER": "CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR",
    "UC_BK_OP_CONV_BWD_DATA": "CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR",
    "UC_A_CONV_MODE": "CUDNN_ATTR_CONVOLUTION_CONV_MODE",
}


def _wheel_header() -> Path:
    header = _real_libcudnn().parents[1] / "include" / "cudnn_graph.h"
    if not header.exists():
        real_client_missing(f"the wheel's cudnn_graph.h is not at {header} (reinstall: {REAL_CUDNN_INSTALL})")
    return header


def test_enum_values_are_cudnns() -> None:
    text = _wheel_header().read_text()
    cudnn = {m[0]: int(m[1]) for m in re.findall(r"\b(CUDNN_\w+)\s*(?:CUDNN_DEPRECATED_ENUM)?\s*=\s*(\d+)", text)}
    ours = dict(re.findall(r"\b(UC_(?:BK|AT|A|PW)_\w+)\s*=\s*(\d+)", UC_GRAPH_H.read_text()))
    assert len(ours) > 60
    for name, value in ours.items():
        prefix = next(p for p in PREFIXES if name.startswith(p))  # the longest first, as listed
        theirs = PREFIXES[prefix] + name[len(prefix) :] + ("_DESCRIPTOR" if prefix.startswith("UC_BK_") else "")
        theirs = RENAMED.get(name, theirs)
        assert theirs in cudnn, f"{name}: no {theirs} in {_wheel_header().name}"
        assert cudnn[theirs] == int(value), f"{name} = {value}, but {theirs} = {cudnn[theirs]}"


def test_hooks_return_the_real_statuses_and_record_what_was_built() -> None:
    if not _paths.PRELOAD.exists():
        pytest.fail(f"libucudnn.so not built at {_paths.PRELOAD}")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.realcudnn.graph_probe", str(_real_libcudnn()), str(_paths.PRELOAD)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["hooked"] == got["direct"]
    # Creating and setting succeed without a GPU (Finalize may not: it loads engine libraries); the NULL descriptor
    # and the wrong attribute type are refused.
    assert got["direct"][0] == 0 and got["direct"][-3] != 0 and got["direct"][-1] != 0
    assert got["recorded_live"] == got["created"] and got["recorded_after_destroy"] == 0
    stats = got["stats"]
    assert stats["graph_calls"] == len(got["hooked"]) + got["created"]  # every call, destroys included
    assert stats["calls"] == 0 and stats["queries"] == 0 and stats["graph_unrecorded"] == 0
