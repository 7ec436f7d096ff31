"""Build ``ucudnn._bridge``: the API-mode cffi module through which Python plans for the preload library.

setup.py hands ``ffibuilder`` to cffi (``cffi_modules``); ``python shim/build/bridge.py`` compiles it in place
into the package folder for development. The module does not link against libucudnn.so: the C wrappers in
``shim/bridge/bridge.c`` find the control API with ``dlsym(RTLD_DEFAULT)`` at run time. The cdef is derived
from the real headers (``ucudnn.h`` for the types, ``ucudnn_bridge.h`` for the wrappers), so C and Python
cannot drift apart. Build-only code: never shipped in the wheel.
"""

from __future__ import annotations

import re
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "shim" / "include"
BRIDGE_SRC = ROOT / "shim" / "bridge"

MODULE = "ucudnn._bridge"

# Our own C (bridge.c) is held to the project's warning level; cffi's generated file includes Python.h and
# its own helpers, so the whole compilation keeps cffi's defaults plus what cannot misfire there.
EXTRA_COMPILE_ARGS = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror"]


def package_version() -> str:
    """``ucudnn.__version__`` read from the source (importing the package at build time is not guaranteed)."""
    text = (ROOT / "ucudnn" / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if not m:
        raise RuntimeError('ucudnn-build: no __version__ = "..." line in ucudnn/__init__.py')
    return m.group(1)


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.DOTALL)


def header_cdef(path: Path, *, types_only: bool = False) -> str:
    """The cdef text of a real C header: preprocessor lines dropped except integer ``#define``s.

    With ``types_only`` only typedefs (and constants) are kept: that is how the bridge takes ucudnn.h's types
    without declaring the shim's functions, which would make the module need libucudnn.so at load time.
    """
    lines: list[str] = []
    for line in _strip_comments(path.read_text(encoding="utf-8")).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            m = re.match(r"#\s*define\s+(\w+)\s+(-?\d+)\s*$", stripped)
            if m and not m.group(1).endswith("_H"):
                lines.append(f"#define {m.group(1)} {m.group(2)}")
            continue
        # The C++ linkage block sits inside #ifdef __cplusplus, whose directives were dropped above.
        if stripped in ('extern "C" {', "}"):
            continue
        lines.append(line)
    if not types_only:
        return "\n".join(lines)
    defines = [ln for ln in lines if ln.startswith("#define")]
    decls = _top_level_declarations("\n".join(ln for ln in lines if not ln.startswith("#define")))
    return "\n".join(defines + [d + ";" for d in decls if d.lstrip().startswith("typedef")])


def _top_level_declarations(text: str) -> list[str]:
    """Split C declarations at ``;`` outside braces."""
    decls: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == ";" and depth == 0:
            decl = "".join(current).strip()
            if decl:
                decls.append(decl)
            current = []
            continue
        current.append(ch)
    return decls


def _setup_relative(path: Path) -> str:
    """setuptools insists on source paths relative to setup.py's directory (pip's cwd); elsewhere keep it whole."""
    try:
        return path.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def make_ffibuilder(*, absolute_paths: bool = False) -> FFI:
    ffi = FFI()
    ffi.cdef(header_cdef(INCLUDE / "ucudnn" / "ucudnn.h", types_only=True))
    ffi.cdef(header_cdef(BRIDGE_SRC / "ucudnn_bridge.h"))
    # The planner the shim calls on a plan-cache miss; defined in ucudnn/_runtime.py with @ffi.def_extern.
    ffi.cdef('extern "Python" int _ucudnn_py_planner(const ucudnn_plan_request *, ucudnn_plan_reply *);')
    # The recorder of verdicts (checks of new plans on real executions); also in ucudnn/_runtime.py.
    ffi.cdef('extern "Python" void _ucudnn_py_recorder(const ucudnn_verdict *);')
    # The framework source (what PyTorch's caching allocator holds unused, and its determinism); also there.
    ffi.cdef('extern "Python" int _ucudnn_py_framework(ucudnn_framework_state *);')
    # The framework's allocator (scratch borrowed from PyTorch's caching allocator); also there.
    ffi.cdef('extern "Python" void *_ucudnn_py_alloc(size_t);')
    ffi.cdef('extern "Python" void _ucudnn_py_free(void *);')
    version = package_version()
    ffi.set_source(
        MODULE,
        # deferred.h calls the extern "Python" callbacks, which are static to this generated file.
        '#include "ucudnn_bridge.h"\n#include "deferred.h"\n',
        sources=[str(BRIDGE_SRC / "bridge.c") if absolute_paths else _setup_relative(BRIDGE_SRC / "bridge.c")],
        include_dirs=[str(INCLUDE), str(BRIDGE_SRC)],
        define_macros=[("UCUDNN_PACKAGE_VERSION", f'"{version}"')],
        extra_compile_args=EXTRA_COMPILE_ARGS,
        libraries=["dl"],
    )
    return ffi


ffibuilder = make_ffibuilder()


def build_in_place() -> Path:
    """Compile the module into ``ucudnn/`` (what an editable install imports), via a scratch directory."""
    import os
    import shutil
    import tempfile

    target = ROOT / "ucudnn" / "_bridge.abi3.so"
    with tempfile.TemporaryDirectory(prefix="ucudnn-bridge-") as tmp:
        # cffi compiles from inside tmpdir, so sources must be absolute here (setuptools wants them relative).
        builder = make_ffibuilder(absolute_paths=True)
        staged = builder.compile(tmpdir=tmp, target=str(Path(tmp) / target.name))
        # Renamed over the old file, never rewritten in place: processes that have it mapped keep working.
        os.replace(shutil.copy2(staged, target.with_name(f".{target.name}.tmp")), target)
    return target


if __name__ == "__main__":
    print("built", build_in_place())
