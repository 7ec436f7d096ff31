"""The enum values the project declares for the cuDNN ABI are cuDNN's own: every ``CUDNN_* = value`` in
shim/include/ucudnn/cudnn_graph_abi.h (and the legacy cudnn_abi.h beside it) against the nvidia-cudnn wheel's
headers, parsed as text. Skipped, with the place looked in, when the wheel is not installed."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from tests.conftest import REAL_CUDNN_INSTALL

INCLUDE = Path(__file__).resolve().parents[2] / "shim" / "include" / "ucudnn"
OURS_RE = re.compile(r"\b(CUDNN_\w+)\s*=\s*(\d+)")
# The wheel marks deprecated enumerators between the name and the value.
THEIRS_RE = re.compile(r"\b(CUDNN_\w+)\s*(?:CUDNN_DEPRECATED_ENUM\s*)?=\s*(\d+)")


def wheel_include() -> Path:
    """The wheel's include folder: beside $UCUDNN_REAL_LIBCUDNN's lib folder, else in the installed nvidia package."""
    explicit = os.environ.get("UCUDNN_REAL_LIBCUDNN")
    candidates = [Path(explicit).resolve().parents[1] / "include"] if explicit else []
    spec = importlib.util.find_spec("nvidia")
    for root in list(spec.submodule_search_locations or []) if spec is not None else []:
        candidates.append(Path(root) / "cudnn" / "include")
    for c in candidates:
        if (c / "cudnn_graph.h").exists():
            return c
    where = [str(c) for c in candidates] or "no nvidia package"
    pytest.skip(
        f"the nvidia-cudnn wheel's headers are not installed (looked for cudnn_graph.h in {where}): "
        f"{REAL_CUDNN_INSTALL}"
    )


def enums(path: Path, pattern: re.Pattern[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for name, value in pattern.findall(path.read_text()):
        found.setdefault(name, int(value))
    return found


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("cudnn_graph_abi.h", ("cudnn_graph.h",)),
        ("cudnn_abi.h", ("cudnn_graph.h", "cudnn_ops.h", "cudnn_cnn.h")),
    ],
)
def test_declared_enum_values_are_cudnns(ours: str, theirs: tuple[str, ...]) -> None:
    include = wheel_include()
    cudnn: dict[str, int] = {}
    for header in theirs:
        cudnn.update(enums(include / header, THEIRS_RE))
    declared = enums(INCLUDE / ours, OURS_RE)
    assert len(declared) > 60, f"parsed only {len(declared)} enumerators from {ours}"
    wrong = {n: (v, cudnn.get(n)) for n, v in declared.items() if cudnn.get(n) != v}
    assert not wrong, f"{ours}: name: (ours, cuDNN's) {wrong}"


def test_declared_functions_exist_in_cudnn() -> None:
    header = (wheel_include() / "cudnn_graph.h").read_text()
    ours = re.findall(r"^cudnnStatus_t (cudnn\w+)\(", (INCLUDE / "cudnn_graph_abi.h").read_text(), re.M)
    assert len(ours) == 7
    for fn in ours:
        assert re.search(rf"\b{fn}\s*\(", header), f"{fn} is not in cudnn_graph.h"
