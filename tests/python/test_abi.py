"""The Python bindings take the C facts from one place: ucudnn/_abi.py, which the build generates from the headers and
shim/hooks.def (shim/build/pyabi.py). A stale module (a header or hooks.def changed since the build) fails here."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests._env import ROOT
from ucudnn import _abi, graph_api
from ucudnn import cudnn as C
from ucudnn.plan_text import ALGO_NAMES


def _build_script(name: str) -> ModuleType:
    sys.path.insert(0, str(ROOT / "shim" / "build"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def test_generated_module_is_current() -> None:
    pyabi = _build_script("pyabi")
    assert Path(_abi.__file__).read_text(encoding="utf-8") == pyabi.render(), (
        "ucudnn/_abi.py is stale: run `python shim/build/pyabi.py` (or `pip install -e .`)"
    )


def test_hooked_functions_are_the_preload_librarys_exported_hooks() -> None:
    preload = _build_script("preload")
    assert set(preload.hook_names()) == C.HOOKED
    assert len(C.HOOKED) == 23


def test_enum_values_and_prototypes_come_from_the_headers() -> None:
    assert int(C.Status.BAD_PARAM) == _abi.CUDNN_STATUS_BAD_PARAM == 2000
    assert C.ALGO_COUNT[C.Op.BWD_FILTER] == _abi.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT == 7
    assert graph_api.A_VP_WS == _abi.CUDNN_ATTR_VARIANT_PACK_WORKSPACE == 1003
    assert ALGO_NAMES["bwd_filter"][3] == "ALGO_3" and ALGO_NAMES["fwd"][2] == "GEMM"
    assert _abi.PROTOTYPES["cudnnConvolutionForward"][1][9] == "size_t"  # workSpaceSizeInBytes
    with pytest.raises(AttributeError, match="not part of the bound cuDNN subset"):
        C.load().raw.cudnnNotAFunction  # noqa: B018


@pytest.mark.parametrize("op", list(C.Op))
def test_op_operands_and_roles_are_inverse(op: C.Op) -> None:
    assert op.roles(*op.operands("x", "w", "y")) == ("x", "w", "y")
    assert C.Op.parse(op.label) is op
