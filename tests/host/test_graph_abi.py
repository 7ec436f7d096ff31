"""The enum values the project declares for the cuDNN ABI are cuDNN's own: every ``CUDNN_* = value`` in
shim/include/ucudnn/cudnn_graph_abi.h (and the legacy cudnn_abi.h beside it) against the nvidia-cudnn wheel's
headers, parsed as text. Skipped, with the place looked in, when the wheel is not installed."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from tests._env import real_client_missing
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
    real_client_missing(
        f"the nvidia-cudnn wheel's headers are not installed (looked for cudnn_graph.h in {where}): "
        f"{REAL_CUDNN_INSTALL}"
    )


# The wheel every declaration was checked against. Older wheels lack what later versions added (FLOOR_MOD in the
# pointwise modes, cudnnGetExecutionPlanWorkspaceSize from 9.23): against one, a name its headers do not have is
# not an error, a value that differs always is. PyTorch 2.11's CUDA 13 wheels pin cuDNN 9.19.
CHECKED_AGAINST = (9, 28)


def installed_version(include: Path) -> tuple[int, int]:
    text = (include / "cudnn_version.h").read_text()
    major, minor = (re.search(rf"#define CUDNN_{part}\s+(\d+)", text) for part in ("MAJOR", "MINOR"))
    assert major and minor, f"no CUDNN_MAJOR/CUDNN_MINOR in {include / 'cudnn_version.h'}"
    return int(major[1]), int(minor[1])


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
    wrong = {n: (v, cudnn[n]) for n, v in declared.items() if n in cudnn and cudnn[n] != v}
    assert not wrong, f"{ours}: name: (ours, cuDNN's) {wrong}"
    missing = sorted(n for n in declared if n not in cudnn)
    if installed_version(include) >= CHECKED_AGAINST:
        assert not missing, f"{ours}: not in cuDNN's headers: {missing}"
    assert len(missing) < len(declared) // 10, f"{ours}: most names missing from {include}: {missing}"


def test_declared_functions_exist_in_cudnn() -> None:
    include = wheel_include()
    header, installed = (include / "cudnn_graph.h").read_text(), installed_version(include)
    ours = re.findall(r"^cudnnStatus_t (cudnn\w+)\(", (INCLUDE / "cudnn_graph_abi.h").read_text(), re.M)
    assert len(ours) == 7
    newer = {"cudnnGetExecutionPlanWorkspaceSize": (9, 23)}  # what a function needs of the wheel
    for fn in ours:
        if installed >= newer.get(fn, (9, 0)):
            assert re.search(rf"\b{fn}\s*\(", header), f"{fn} is not in cudnn_graph.h"
