"""ucudnn._bridge and ucudnn._runtime in a process without the preload library; the built artifacts' linkage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ucudnn
from ucudnn import bridge, planner
from ucudnn.bridge import ffi, lib

from .conftest import ROOT


def test_compiled_version_matches_package() -> None:
    assert ffi.string(lib.ucudnn_bridge_package_version()).decode() == ucudnn.__version__


def test_struct_layout_matches_cudnn_perf() -> None:
    # ucudnn_perf mirrors cuDNN's perf structs (reference/cudnn-api.md): the shim may copy them bytewise.
    assert ffi.sizeof("ucudnn_perf") == 48
    assert ffi.offsetof("ucudnn_perf", "time_ms") == 8
    assert ffi.offsetof("ucudnn_perf", "memory") == 16
    assert ffi.offsetof("ucudnn_perf", "determinism") == 24
    assert ffi.offsetof("ucudnn_perf", "math_type") == 28
    assert lib.UCUDNN_ABI_VERSION == bridge.ABI_VERSION == 4
    assert lib.UCUDNN_MAX_MICRO_BATCHES == planner.MAX_MICRO_BATCHES  # no plan the shim cannot hold


def test_without_shim_every_call_says_so() -> None:
    assert not bridge.shim_loaded()
    with pytest.raises(bridge.ShimNotLoaded, match="ucudnn run"):
        bridge.stats()
    with pytest.raises(bridge.ShimNotLoaded):
        bridge.shim_version()
    with pytest.raises(bridge.ShimNotLoaded):
        bridge.set_option("UCUDNN_BATCH_SIZE_POLICY", "all")
    with pytest.raises(bridge.ShimNotLoaded):
        bridge.benchmark(ffi.NULL, 4, 8)
    assert lib.ucudnn_bridge_set_planner(lib._ucudnn_py_planner) == bridge.NO_SHIM


def test_importing_runtime_without_shim_is_harmless() -> None:
    code = "from ucudnn import _runtime; print(_runtime.registered())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
    assert proc.stderr == ""


def test_stale_bridge_build_is_refused() -> None:
    # A bridge compiled for another version must fail at import with a message saying what to do.
    code = "import ucudnn; ucudnn.__version__ = '0.0.0-other'; import ucudnn.bridge"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "built for ucudnn" in proc.stderr and "rebuild" in proc.stderr


def _dynamic(path: Path) -> str:
    """readelf's dynamic section and dynamic symbol table of ``path``."""
    readelf = subprocess.run(["readelf", "-d", "--dyn-syms", "-W", str(path)], capture_output=True, text=True)
    assert readelf.returncode == 0, readelf.stderr
    return readelf.stdout


def test_bridge_does_not_link_the_shim() -> None:
    text = _dynamic(Path(sys.modules["ucudnn._bridge"].__file__ or ""))
    assert "libucudnn" not in text
    undefined = [ln for ln in text.splitlines() if " UND " in ln and " ucudnn_" in ln]
    assert undefined == []


def test_embedded_planner_linkage(embedded_planner: Path) -> None:
    text = _dynamic(embedded_planner)
    assert "libpython3" in text  # the dependency that must stay off libucudnn.so
    exported = [ln.split()[-1] for ln in text.splitlines() if " GLOBAL " in ln and " UND " not in ln]
    assert "ucudnn_embedded_planner_init" in exported


def test_cdef_comes_from_the_headers() -> None:
    sys.path.insert(0, str(ROOT / "shim" / "build"))
    try:
        import bridge as build_bridge  # type: ignore[import-not-found]  # the build script, not ucudnn.bridge
    finally:
        sys.path.pop(0)
    types = build_bridge.header_cdef(ROOT / "shim" / "include" / "ucudnn" / "ucudnn.h", types_only=True)
    assert "ucudnn_plan_request" in types and "ucudnn_planner_fn" in types
    # The shim's functions must not be declared: the module would then need libucudnn.so to load.
    assert "ucudnn_set_planner" not in types and "ucudnn_benchmark(" not in types
    assert not hasattr(lib, "ucudnn_set_planner")
