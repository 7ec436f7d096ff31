"""Build the real-client programs once per source state: C++17 against the real cudnn_frontend headers.

Headers come from wheels, never from this repository: ``nvidia-cudnn-frontend`` (its ``include/``),
``nvidia-cudnn-cu13`` (cuDNN's) and ``nvidia-cuda-runtime`` / ``-crt`` / ``-cccl`` (CUDA's), installed with
``--no-deps``. NVRTC's header is a stand-in of ours (``include/nvrtc.h``), and the CUDA runtime functions the
frontend links are stand-ins too (``cuda_standin.cpp``); the cuDNN calls link against the host backend. Each
program is also built with the frontend's dynamic loading (``DYNAMIC``): it then links neither and takes both
through dlopen + dlsym, cuDNN from the libcudnn.so.9 it dlopens, the runtime from the stand-in as a shared library.

A translation unit that includes the frontend takes about 40 s to compile on one core, so the objects are cached
in the temporary directory under a hash of everything that changes them (our sources, the flags, the compiler's
version and the wheels' versions), as ``tests/host/_cbuild.py`` does for C libraries; the four large units compile
in parallel. Linking is cached under the objects' hash and the host backend's bytes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (
    "client.h", "client.cpp", "cuda_standin.cpp", "cudnn_calls.h", "torch_v0.cpp", "graph_v1.cpp", "include/nvrtc.h",
)  # fmt: skip
PROGRAMS = ("torch_v0", "graph_v1")
# The same programs built to reach cuDNN as XLA does (cudnn_calls.h): nothing of cuDNN or the CUDA runtime linked.
DYNAMIC = "-DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING"
# Each wheel: its include folder's name and a header (relative to that folder) that locates it.
WHEELS = {
    "nvidia-cudnn-frontend": ("include", "cudnn_frontend.h"),
    "nvidia-cudnn-cu13": ("include", "cudnn_graph.h"),
    "nvidia-cuda-runtime": ("include", "cuda_runtime_api.h"),
    "nvidia-cuda-crt": ("include", "crt/host_defines.h"),
    "nvidia-cuda-cccl": ("include/cccl", "cuda/std/version"),
}
INSTALL = "pip install --no-deps " + " ".join(WHEELS)
# -O1 as a client's release build would: at -O0 GCC also emits the frontend's unused static helpers, which
# would then link legacy cuDNN functions no client calls.
CXX_FLAGS = ("-std=c++17", "-O1", "-g0", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function")


class Unavailable(Exception):
    """What is missing to build the programs (the test skips with it)."""


def _include_dir(dist: str, folder: str, header: str) -> Path:
    try:
        files = md.distribution(dist).files or []
    except md.PackageNotFoundError:
        raise Unavailable(f"the {dist} wheel is not installed: {INSTALL}") from None
    for f in files:
        if ("/" + str(f).replace(os.sep, "/")).endswith(f"/{folder}/{header}"):
            located = Path(str(md.distribution(dist).locate_file(f)))
            return located.parents[len(Path(header).parts) - 1]
    raise Unavailable(f"the {dist} wheel has no {folder}/{header}: reinstall it ({INSTALL})")


@dataclass(frozen=True)
class Programs:
    torch_v0: Path
    graph_v1: Path
    torch_v0_dl: Path  # dlopen + dlsym builds (DYNAMIC)
    graph_v1_dl: Path
    cudart: Path  # the CUDA runtime stand-in the _dl programs load (CUDNN_FRONTEND_CUDART_LIB_NAME)
    compile_s: float  # seconds spent compiling in this process (0 when the cache had everything)


def _compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise Unavailable(f"no C++ compiler ({cxx}): install one (apt-get install g++) or set CXX")
    return cxx


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:16]


def _flags() -> list[str]:
    """The compiler flags: C++17 at the project's warning level, our include folder, the wheels' as system ones."""
    includes = [HERE / "include", *(_include_dir(d, *where) for d, where in WHEELS.items())]
    flags = [*CXX_FLAGS, "-I", str(includes[0])]
    for inc in dict.fromkeys(includes[1:]):  # the CUDA wheels share one folder
        flags += ["-isystem", str(inc)]
    return flags


def _cache_dir(cxx: str, flags: list[str], sources: tuple[str, ...], kind: str) -> Path:
    """A folder of the temporary directory named by a hash of everything that changes what is built there."""
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    key = _digest(
        [
            *((HERE / s).read_bytes() for s in sources),
            "\0".join(flags).encode(),
            version.encode(),
            *(f"{d}=={md.version(d)}".encode() for d in WHEELS),
        ]
    )
    out = Path(tempfile.gettempdir()) / f"ucudnn-test-libs-{os.getuid()}" / f"{kind}-{key}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def cudart_standin() -> Path:
    """The CUDA runtime stand-in (cuda_standin.cpp, with the client's clock) as a shared library, for clients that
    load the CUDA runtime themselves: the frontend's Python package dlopens the one CUDNN_FRONTEND_CUDART_LIB_NAME
    names."""
    cxx = _compiler()
    flags = [*_flags(), "-fPIC", "-shared"]
    lib = _cache_dir(cxx, flags, ("client.h", "client.cpp", "cuda_standin.cpp", "include/nvrtc.h"), "cudart") / (
        "libcudart_standin.so"
    )
    if not lib.exists():
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        cmd = [cxx, *flags, str(HERE / "cuda_standin.cpp"), str(HERE / "client.cpp"), "-o", str(tmp), "-ldl"]
        made = subprocess.run(cmd, capture_output=True, text=True)
        if made.returncode != 0:
            raise RuntimeError(f"building the CUDA runtime stand-in failed:\n{made.stderr}")
        tmp.replace(lib)
    return lib


def build(host_lib: Path) -> Programs:
    """The two programs linked against ``host_lib`` (the host backend's libcudnn.so.9), and the two that dlopen a
    libcudnn.so.9 (the loader's search finds ``host_lib`` where LD_LIBRARY_PATH names its folder)."""
    import time

    cxx = _compiler()
    flags = _flags()
    out = _cache_dir(cxx, flags, SOURCES, "frontend")
    start = time.monotonic()
    cudart = cudart_standin()
    units = {u: [f"{u}.cpp"] for u in ("client", "cuda_standin", *PROGRAMS)}
    units |= {f"{u}_dl": [DYNAMIC, f"{u}.cpp"] for u in PROGRAMS}
    jobs = []
    for unit, args in units.items():
        obj = out / f"{unit}.o"
        if obj.exists():
            continue
        tmp = obj.with_suffix(f".{os.getpid()}.tmp")
        cmd = [cxx, *flags, "-c", *args[:-1], str(HERE / args[-1]), "-o", str(tmp)]
        jobs.append((subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True), tmp, obj, unit))
    for proc, tmp, obj, unit in jobs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {unit} failed:\n{err}")
        tmp.replace(obj)
    lib_key = _digest([host_lib.read_bytes()])
    links = {prog: [f"{prog}.o", "client.o", "cuda_standin.o", f"-L{host_lib.parent}", f"-l:{host_lib.name}"]
             for prog in PROGRAMS}  # fmt: skip
    links |= {f"{prog}_dl": [f"{prog}_dl.o", "client.o", "-ldl"] for prog in PROGRAMS}
    linked = {}
    for prog, inputs in links.items():
        exe = out / f"{prog}-{lib_key}"
        if not exe.exists():
            tmp = exe.with_suffix(f".{os.getpid()}.tmp")
            cmd = [cxx, *(str(out / i) if i.endswith(".o") else i for i in inputs), "-o", str(tmp)]
            linking = subprocess.run(cmd, capture_output=True, text=True)
            if linking.returncode != 0:
                raise RuntimeError(f"linking {prog} failed:\n{linking.stderr}")
            tmp.replace(exe)
        linked[prog] = exe
    return Programs(**linked, cudart=cudart, compile_s=time.monotonic() - start)
