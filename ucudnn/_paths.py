"""Where the built native artifacts live inside the installed package."""

from __future__ import annotations

from pathlib import Path

LIB_DIR = Path(__file__).resolve().parent / "_lib"

HOST_CUDNN = LIB_DIR / "libcudnn.so.9"
PRELOAD = LIB_DIR / "libucudnn.so"
EMBEDDED_PLANNER = LIB_DIR / "libucudnn_planner.so"
# The headers the package ships: <ucudnn/cudnn_abi.h> (the cuDNN subset the host backend implements, with the
# real library's names and ABI), <ucudnn/cudnn_graph_abi.h> (its graph API) and <ucudnn/ucudnn.h> (the control API).
INCLUDE_DIR = LIB_DIR / "include"


class NotBuiltError(FileNotFoundError):
    """A native artifact is missing: the package was not built (run ``pip install .``)."""


def require(path: Path) -> Path:
    """Return ``path`` if the artifact exists, else raise NotBuiltError naming it."""
    if not path.exists():
        raise NotBuiltError(f"ucudnn: {path.name} is not built at {path}; reinstall with `pip install .`")
    return path


def artifacts() -> dict[str, str]:
    """Absolute paths of the native artifacts that exist, keyed as ``ucudnn paths --json`` prints them."""
    out: dict[str, str] = {}
    for key, path in (("host_cudnn", HOST_CUDNN), ("preload", PRELOAD), ("embedded_planner", EMBEDDED_PLANNER)):
        if path.exists():
            out[key] = str(path)
    out["lib_dir"] = str(LIB_DIR)
    if (INCLUDE_DIR / "ucudnn").is_dir():
        out["include_dir"] = str(INCLUDE_DIR)
    return out


def cflags() -> str:
    """Compiler flags of a C/C++ program built against the shipped headers."""
    return f"-I{require(INCLUDE_DIR)}"


def libs() -> str:
    """Linker flags of a program linked against the host backend (found at run time through its rpath); on a GPU
    machine link the real cuDNN instead and run the program under ``ucudnn run``."""
    lib = require(HOST_CUDNN).parent
    return f"-L{lib} -Wl,-rpath,{lib} -l:{HOST_CUDNN.name}"
