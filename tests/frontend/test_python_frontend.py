"""NVIDIA's cudnn_frontend Python package, a client nobody here wrote, drives the host backend through the preload
library on a CPU (marker ``realclient``).

The package (the ``cudnn`` module of the nvidia-cudnn-frontend wheel, the one CI installs for the headers) reaches
cuDNN only through ``dlopen`` + ``dlsym`` on the library it loads itself, as JAX/XLA does: plain interposition sees
none of its calls, the preload library's ``dlsym`` does. ``frontend_py_conv.py`` writes one convolution the way the
package's users do (``pygraph``, heuristics mode A, ``execute``) on host buffers; the package loads the host
backend (the first libcudnn.so.9 on LD_LIBRARY_PATH) and our CUDA runtime stand-in
(CUDNN_FRONTEND_CUDART_LIB_NAME). Each op runs alone and under ``ucudnn run``:

- alone, the output is the NumPy reference's: the client works on the host backend;
- under ucudnn's defaults (no memory pressure) its calls are seen through ``dlsym`` and its graph planned, and
  nothing changes: the same workspace, the same output bit for bit;
- under ``--workspace 4MiB``, below the 11-13 MB its engine asks for, the graph is planned within the limit
  (micro-batched, for fprop and dgrad) and the output is still the reference's.

Under ucudnn's defaults a client short of memory gets a micro-batched variant of the fast engine offered among the
heuristics results (docs/graph-path.md). This package keeps one plan entry per (engine, knobs), the first; the
variant's knob choices read one more than its original's (a knob of ucudnn's own), so it keeps its place.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._env import project_pythonpath, real_client_missing
from ucudnn import _paths
from ucudnn import testing as T

from . import _build
from .conftest import base_env

pytestmark = pytest.mark.realclient

PROBE = Path(__file__).with_name("frontend_py_conv.py")
LIMIT = 4 << 20


@pytest.fixture(scope="module")
def cudart() -> Path:
    # Located, not imported: importing it would load a libcudnn.so.9 into this process.
    spec = importlib.util.find_spec("cudnn")
    if spec is None or spec.origin is None or not (Path(spec.origin).parent / "_pygraph.py").exists():
        real_client_missing(
            "cudnn_frontend's Python package is not installed: pip install --no-deps nvidia-cudnn-frontend"
        )
    if not _paths.HOST_CUDNN.exists():
        pytest.fail(f"the host backend is not built ({_paths.HOST_CUDNN}): run `pip install -e .`", pytrace=False)
    try:
        return _build.cudart_standin()
    except _build.Unavailable as exc:
        real_client_missing(f"the CUDA runtime stand-in: {exc}")


Ran = tuple[Any, dict[str, Any], dict[str, Any], Path]


def run(
    cudart: Path,
    tmp_path: Path,
    op: str,
    ucudnn: tuple[str, ...] | None = None,
    cap: int | None = None,
    replay: list[Any] | None = None,
) -> Ran:
    """The probe for ``op`` (a client of ``cap`` bytes of workspace where given, on a device of as much; building
    the pair ``replay`` again where given), alone (None) or under ``ucudnn run`` with these options: its output
    (None where the library refused the pair), result, stats (none alone) and folder."""
    folder = tmp_path / ("alone" if ucudnn is None else "under" + "".join(ucudnn).replace("-", "_"))
    folder = folder.with_name(folder.name + ("_replay" if replay is not None else ""))
    folder.mkdir()
    env = base_env(tmp_path)
    env["PYTHONPATH"] = project_pythonpath(env)
    env["CUDNN_FRONTEND_CUDART_LIB_NAME"] = str(cudart)
    probe = [sys.executable, str(PROBE), op, str(folder)]
    if cap is not None:
        probe.append(str(cap))
        env["UCUDNN_HOST_DEVICE_MEMORY"] = str(cap)  # what the client can allocate is all the device has
    if replay is not None:
        probe.append(json.dumps(replay))
    stats_file = folder / "stats.json"
    cmd = probe
    if ucudnn is not None:
        cmd = [sys.executable, "-m", "ucudnn.cli", "run", *ucudnn, "--stats-file", str(stats_file), "--", *probe]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stats = json.loads(stats_file.read_text()) if ucudnn is not None else {}
    result = json.loads((folder / "result.json").read_text())
    output = None if "refused" in result else np.load(folder / "output.npy")
    return output, result, stats, folder


def reference(op: str, folder: Path) -> np.ndarray:
    """What ``op`` computes from the probe's inputs, in float64 (NumPy)."""
    data = np.load(folder / "inputs.npz")
    x, w, dy = data["x"], data["w"], data["dy"]
    params = T.ConvParams(pad=(1, 1), stride=(1, 1), dilation=(1, 1))
    if op == "fprop":
        return T.conv_forward(x, w, params)
    if op == "dgrad":
        return T.conv_backward_data(w, dy, params, x.shape)
    return T.conv_backward_filter(x, dy, params, w.shape)


# Whether ucudnn's plan within LIMIT divides the batch: for wgrad the fastest plan within it is an undivided engine
# (1.2 MB of workspace, in the host backend's timing model), so only the limit and the result are asserted there.
@pytest.mark.parametrize(("op", "divides"), [("fprop", True), ("dgrad", True), ("wgrad", False)])
def test_the_frontends_python_package_is_seen_through_dlsym_and_planned_within_a_limit(
    cudart: Path, tmp_path: Path, op: str, divides: bool
) -> None:
    alone, alone_result, _, folder = run(cudart, tmp_path, op)
    expected = reference(op, folder)
    T.assert_close(alone, expected, np.float32, f"{op} alone")
    assert alone_result["workspace"] > LIMIT  # the engine heuristics mode A puts first wants more than the limit

    # Defaults: seen and planned, nothing changed (no memory pressure on the host backend's roomy device).
    same, same_result, stats, _ = run(cudart, tmp_path, op, ())
    assert stats["dlsym_hooked"] > 0 and stats["graph_conv_plans"] == 1 and stats["graph_executes"] == 1, stats
    assert stats["graph_split_plans"] == 0 and stats["graph_micro_batches"] == 0, stats
    assert same_result == alone_result and np.array_equal(same, alone)

    # An explicit limit below what that engine asks for: planned within it (micro-batched for fprop and dgrad),
    # the same result.
    limited, limited_result, stats, _ = run(cudart, tmp_path, op, ("--workspace", str(LIMIT)))
    assert stats["graph_conv_plans"] == 1 and stats["graph_over_limit"] == 0, stats
    assert 0 < limited_result["workspace"] <= LIMIT, limited_result
    if divides:
        assert stats["graph_split_plans"] == 1 and stats["graph_micro_batches"] > 1, stats
    T.assert_close(limited, expected, np.float32, f"{op} under {LIMIT} bytes")


@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_a_client_short_of_memory_gets_the_fast_engine_micro_batched_by_default(
    cudart: Path, tmp_path: Path, op: str
) -> None:
    """With 4 MiB to allocate, alone the client runs the fastest engine within 4 MiB (fprop: 90 KB of workspace,
    0.068 ms in the timing model). ucudnn's defaults offer the fast engine (fprop: 12.7 MB undivided) micro-batched
    within the same 4 MiB (4 x 2 samples, 3.3 MB, 0.032 ms), and the client runs it: the package's plan list, one
    entry per (engine, knobs), holds the variant right after its original, named by ucudnn's knob (a type the
    configuration does not choose, cuDNN's WORKSPACE (25) here, and a value reserved for ucudnn)."""
    alone, alone_result, _, folder = run(cudart, tmp_path, op, cap=LIMIT)
    expected = reference(op, folder)
    T.assert_close(alone, expected, np.float32, f"{op} alone, capped")
    under, under_result, stats, _ = run(cudart, tmp_path, op, (), cap=LIMIT)
    T.assert_close(under, expected, np.float32, f"{op} under ucudnn, capped")
    assert stats["graph_offers"] == 1, stats
    listed, seen = alone_result["plans"], under_result["plans"]
    at = seen.index(listed[0] + "_k25=1969452388")  # the fast engine's variant, named by ucudnn's knob
    assert seen[:at] + seen[at + 1 :] == listed and at >= 1 and seen[at - 1] == listed[0], (listed, seen)
    assert under_result["workspace"] <= LIMIT and stats["graph_micro_batches"] > 1, (under_result, stats)
    assert under_result["model_ms"] < alone_result["model_ms"], (under_result, alone_result)


def test_a_variant_kept_by_its_engine_and_knobs_is_built_again_as_a_variant(cudart: Path, tmp_path: Path) -> None:
    """A client keeps a choice as the package's (engine, knobs) pair and builds it again later (its
    create_execution_plan). The variant's pair names its knob, a knob type the configuration does not choose with
    a value reserved for ucudnn: under ucudnn the shim takes that knob out before the library sees the
    configuration and makes it a variant again, micro-batched within what the client can allocate; without
    ucudnn the host backend refuses it (its engines take no knobs)."""
    _, listed, _, folder = run(cudart, tmp_path, "fprop", (), cap=LIMIT)
    expected = reference("fprop", folder)
    at = listed["plans"].index(listed["plans"][0] + "_k25=1969452388")
    variant = listed["pairs"][at]
    # the fast engine's, one knob more: its value ucudnn's (its type in the package's own enum, WORKSPACE)
    assert variant[0] == listed["pairs"][0][0] and list(variant[1].values()) == [0x75637564], listed["pairs"]
    again, result, stats, _ = run(cudart, tmp_path, "fprop", (), cap=LIMIT, replay=variant)
    assert stats["graph_variants_rebuilt"] == 1, stats
    assert 0 < result["workspace"] <= LIMIT and stats["graph_micro_batches"] > 1, (result, stats)
    T.assert_close(again, expected, np.float32, "fprop, the variant built again")
    alone = run(cudart, tmp_path, "fprop", cap=LIMIT)[1]  # what the client runs alone within the same memory
    assert result["model_ms"] < alone["model_ms"], (alone, result)
    _, refused, _, _ = run(cudart, tmp_path, "fprop", cap=LIMIT, replay=variant)
    assert "refused" in refused and "NOT_SUPPORTED" in refused["refused"], refused
