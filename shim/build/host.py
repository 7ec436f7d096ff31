"""Build the host backend: a CPU ``libcudnn.so.9`` stand-in, GEMM from the scipy-openblas32 wheel."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from native import SHIM, link_shared

SONAME = "libcudnn.so.9"
# The host backend's folders beside its contract (hb_internal.h).
PARTS = ("kernels", "api", "graph")


def _openblas_lib() -> Path:
    import scipy_openblas32  # build requirement, also a runtime requirement

    return Path(scipy_openblas32.get_lib_dir()) / "libscipy_openblas.so"


def _openblas_license_files() -> list[Path]:
    from importlib.metadata import distribution

    dist = distribution("scipy-openblas32")
    found = [Path(str(dist.locate_file(f))) for f in (dist.files or []) if "LICENSE" in f.name.upper()]
    if not found:
        raise RuntimeError("ucudnn-build: scipy-openblas32 ships no licence file to bundle with its library")
    return found


def build(out_dir: Path, blas_lib: Path | None = None) -> list[Path]:
    """Build into ``out_dir``. ``blas_lib``: the libscipy_openblas.so to link and copy, for a build for another
    target (tests/preload/test_aarch64.py builds for AArch64 with that target's wheel); default the installed one."""
    sources = sorted((SHIM / "host").rglob("*.c"))
    if not sources:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    # The BLAS is copied next to the backend and found through $ORIGIN, so the backend works the same in
    # a regular install, an editable install and a build tree, with no system BLAS.
    blas = out_dir / "libscipy_openblas.so"
    tmp = out_dir / ".libscipy_openblas.so.tmp"
    shutil.copy2(blas_lib or _openblas_lib(), tmp)
    os.replace(tmp, blas)  # never rewrite a library another process has mapped
    # The copied BLAS is redistributed with the package, so its licence travels with it.
    notices = _openblas_license_files()
    for i, notice in enumerate(notices):
        shutil.copy2(notice, out_dir / f"LICENSE.scipy-openblas32{'' if i == 0 else f'.{i}'}.txt")
    lib = link_shared(
        sources,
        out_dir / SONAME,
        soname=SONAME,
        # shim/ for hooks.def, the list the API files define their convolution calls from.
        include_dirs=[SHIM, SHIM / "host", *(SHIM / "host" / part for part in PARTS)],
        cflags=["-O3", "-fvisibility=hidden", "-pthread"],
        ldflags=[f"-L{out_dir}", "-Wl,-rpath,$ORIGIN", "-Wl,--no-undefined", "-pthread"],
        libs=["scipy_openblas", "m"],
    )
    return [blas, lib]
