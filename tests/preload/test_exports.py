"""The preload library exports exactly hooks.def's hooks and the ucudnn_* API, unversioned, and needs only libc."""

from __future__ import annotations

import platform
import re
from pathlib import Path

from tests._elf import exports, needed, readelf

from .conftest import preload_build as _preload_build


def test_hook_list_is_the_declared_one() -> None:
    build = _preload_build()
    hooks = build.hook_names()
    # 4 executions, 12 queries (workspace sizes, Get*_v7, Find*, Find*Ex), 7 graph-API calls.
    assert len(hooks) == 23
    for name in (
        "cudnnBackendExecute",
        "cudnnBackendSetAttribute",
        "cudnnBackendInitialize",
        "cudnnConvolutionForward",
        "cudnnConvolutionBiasActivationForward",
        "cudnnFindConvolutionBackwardFilterAlgorithmEx",
        "cudnnGetConvolutionBackwardDataWorkspaceSize",
    ):
        assert name in hooks
    assert build.libc_names() == ["dlsym"]  # the door of frameworks that dlopen cuDNN
    assert "ucudnn_set_planner" in build.control_names()
    assert "ucudnn_dlsym_unhooked" in build.control_names()
    assert "ucudnn_debug_kernel_key" in build.control_names()
    assert "ucudnn_debug_graph_json" in build.control_names()


def test_nm_matches_declared_exports(preload_lib: Path) -> None:
    symbols = exports(preload_lib)
    # Unversioned: a private version (name@VER) would stop the hooks from interposing on cudnn...@libcudnn.so.9.
    assert not [s for s in symbols if "@" in s]
    assert sorted(symbols) == sorted(_preload_build().exported_names())


def test_no_version_definitions_and_only_libc(preload_lib: Path) -> None:
    libraries = set(needed(preload_lib))
    # A build with UCUDNN_BUILD_SANITIZE (for the tests only) needs the sanitizers' runtimes too.
    build = _preload_build()
    sanitizer = build.SANITIZERS[build.sanitizer()][1]
    assert libraries <= {"libc.so.6", "libdl.so.2", "libpthread.so.0"} | sanitizer, libraries
    assert ".gnu.version_d" not in readelf(preload_lib, "-V")


def test_dlsym_is_exported_unversioned_where_it_has_an_entry(preload_lib: Path) -> None:
    """x86-64 and AArch64: dlsym is exported without a version (so it interposes dlsym@GLIBC_2.2.5, AArch64's
    @GLIBC_2.17, and @GLIBC_2.34 alike), and the library never calls it itself -- no relocation names it: its own
    lookups use the real dlsym. Elsewhere it is not exported at all (no assembly entry: a C wrapper would become the
    caller of other libraries' RTLD_NEXT). test_aarch64.py checks an AArch64 build on this machine."""
    exported = exports(preload_lib)
    relocs = readelf(preload_lib, "-r", "-W")
    assert not re.search(r"\sdlsym(@\S*)?\s", relocs), "the library calls its own exported dlsym"
    if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        assert "dlsym" in exported and _preload_build().interposes_libc()
    else:
        assert "dlsym" not in exported
