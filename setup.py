"""Build glue: the pure-Python metadata lives in pyproject.toml; this compiles the native artifacts."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "shim" / "build"))

import native  # noqa: E402
import pyabi  # noqa: E402


class BinaryDistribution(Distribution):
    """The wheel carries shared libraries, so it is platform-specific even without a Python extension."""

    def has_ext_modules(self) -> bool:
        return True


class BuildNative(build_ext):
    def run(self) -> None:
        super().run()
        out = ROOT / "ucudnn" / "_lib" if self.inplace else Path(self.build_lib) / "ucudnn" / "_lib"
        native.build_all(out)
        pyabi.write(out.parent)  # ucudnn/_abi.py, beside _lib
        # The C headers of the cuDNN subset and of the control API, for programs built against the host backend
        # (`ucudnn paths --cflags`).
        shutil.copytree(ROOT / "shim" / "include" / "ucudnn", out / "include" / "ucudnn", dirs_exist_ok=True)


cffi_modules = [f"shim/build/{n}.py:ffibuilder" for n in ("bridge",) if (ROOT / "shim/build" / f"{n}.py").exists()]

setup(
    distclass=BinaryDistribution,
    cmdclass={"build_ext": BuildNative},
    cffi_modules=cffi_modules,
)
