"""What the real-cuDNN tests share: stand-ins for the libraries NVIDIA's libcudnn.so.9 loads that need a GPU driver,
and the environment of a probe process run on one library, with or without the preload library."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests._env import project_pythonpath
from ucudnn import _paths

HERE = Path(__file__).resolve().parent
STANDINS = {"libcuda.so.1": HERE / "standin" / "libcuda.c", "libcublasLt.so.13": HERE / "standin" / "libcublaslt.c"}


@pytest.fixture(scope="session")
def standin_dir() -> Path:
    """A folder holding the stand-in libraries under the names the real library loads (built once per source)."""
    digest = hashlib.sha256(b"".join(src.read_bytes() for src in STANDINS.values())).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"ucudnn-test-libs-{os.getuid()}" / f"standin-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    for soname, src in STANDINS.items():
        lib = folder / soname
        if not lib.exists():
            tmp = folder / f"{soname}.{os.getpid()}.tmp"
            cmd = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", f"-Wl,-soname,{soname}"]
            subprocess.run([*cmd, str(src), "-o", str(tmp)], check=True)
            tmp.replace(lib)
    return folder


def probe_env(*, standins: Path | None = None, preload: bool = False) -> dict[str, str]:
    """This process's environment without UCUDNN_* and LD_PRELOAD, importing this checkout; the stand-ins on the
    library path where given; the preload library in LD_PRELOAD where asked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = project_pythonpath(env)
    if standins is not None:
        env["LD_LIBRARY_PATH"] = str(standins)
    if preload:
        if not _paths.PRELOAD.exists():
            pytest.fail(f"libucudnn.so not built at {_paths.PRELOAD}")
        env["LD_PRELOAD"] = str(_paths.PRELOAD)
    return env
