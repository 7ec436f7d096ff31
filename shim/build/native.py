"""Build-time helpers shared by the per-artifact build scripts (never shipped in the wheel).

Each native artifact has one script beside this file exposing ``build(out_dir: Path) -> list[Path]``;
``build_all`` runs them in dependency order. C is compiled as C11 with ``-Wall -Wextra -Werror``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "shim"
INCLUDE = SHIM / "include"
CONFIG_PY = ROOT / "ucudnn" / "config.py"

# -ffile-prefix-map: no build directory in the libraries, so that a build of the same sources is the same file
# (and has the same GNU build-id, the identity the cache keys benchmarks on) wherever it was built.
CFLAGS = [
    "-std=c11",
    "-O2",
    "-g",
    "-fPIC",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-D_GNU_SOURCE",
    f"-ffile-prefix-map={ROOT}=.",
]


def load_config() -> ModuleType:
    """ucudnn/config.py, loaded from its file (it imports only the standard library; the package is not built yet)."""
    spec = importlib.util.spec_from_file_location("_ucudnn_config_for_build", CONFIG_PY)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"ucudnn-build: cannot load {CONFIG_PY}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks the module up while the class body runs
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


# What UCUDNN_BUILD_SANITIZE adds to every compilation and link of the native libraries, and the runtime library
# the preload library may then need beside libc.
SANITIZERS = {
    "none": ([], set()),
    "undefined": (["-fsanitize=undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"], {"libubsan.so.1"}),
    "address": (
        ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"],
        {"libasan.so.8", "libubsan.so.1"},
    ),
}


_sanitizer_lock = threading.Lock()


@functools.cache
def _sanitizer(value: str | None) -> str:
    cfg = load_config()
    try:
        return str(cfg.get("UCUDNN_BUILD_SANITIZE", {} if value is None else {"UCUDNN_BUILD_SANITIZE": value}))
    except cfg.ConfigError as exc:
        raise RuntimeError(f"ucudnn-build: {exc}") from None


def sanitizer() -> str:
    """UCUDNN_BUILD_SANITIZE, checked as ucudnn.config checks every variable (a bad value is an error naming it).
    Compilations run in threads: the config module is loaded by one at a time."""
    with _sanitizer_lock:
        return _sanitizer(os.environ.get("UCUDNN_BUILD_SANITIZE"))


def compiler() -> list[str]:
    """The C compiler command: $CC, else the one Python was built with, else cc; with UCUDNN_BUILD_SANITIZE's
    flags."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc) + SANITIZERS[sanitizer()][0]


def run(cmd: list[str]) -> None:
    # One write per line: compile_objects runs several at once.
    print("ucudnn-build: " + " ".join(shlex.quote(c) for c in cmd) + "\n", end="", flush=True)
    subprocess.run(cmd, check=True)


def compile_objects(units: list[tuple[Path, list[Path]]], obj_dir: Path, cflags: list[str] | None = None) -> list[Path]:
    """Compile each (source, include folders) unit into ``obj_dir`` (in parallel); the objects, in the units' order.

    Each unit sees only its own include folders (and the public headers): a layer compiled without an upper layer's
    folder cannot include that layer's header.
    """
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> Path:
        source, include_dirs = units[i]
        obj = obj_dir / f"{i:03d}_{source.stem}.o"
        cmd = compiler() + CFLAGS + list(cflags or [])
        for inc in [INCLUDE, *include_dirs]:
            cmd += ["-I", str(inc)]
        run([*cmd, "-c", "-o", str(obj), str(source)])
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(one, range(len(units))))


def link_shared(
    sources: list[Path],
    output: Path,
    *,
    soname: str | None = None,
    include_dirs: list[Path] | None = None,
    cflags: list[str] | None = None,
    ldflags: list[str] | None = None,
    libs: list[str] | None = None,
) -> Path:
    """Compile ``sources`` (or take objects) and link them into the shared library ``output`` in one compiler call."""
    output.parent.mkdir(parents=True, exist_ok=True)
    # Link to a temporary name and rename over the target: a process that has the old library mapped keeps
    # its inode instead of seeing the file rewritten under it (SIGBUS).
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    cmd = compiler() + CFLAGS + list(cflags or [])
    for inc in [INCLUDE, *(include_dirs or [])]:
        cmd += ["-I", str(inc)]
    cmd += ["-shared", "-o", str(tmp)]
    cmd += [str(s) for s in sources]
    if soname:
        cmd.append(f"-Wl,-soname,{soname}")
    cmd += list(ldflags or [])
    cmd += [f"-l{lib}" for lib in (libs or [])]
    try:
        run(cmd)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    return output


def build_all(out_dir: Path) -> list[Path]:
    """Build every native artifact into ``out_dir`` (the package's ``_lib`` folder)."""
    import importlib

    built: list[Path] = []
    for name in ("host", "preload", "planner_embed"):
        script = Path(__file__).with_name(f"{name}.py")
        if not script.exists():
            continue
        mod = importlib.import_module(name)
        built += mod.build(out_dir)
    return built


if __name__ == "__main__":
    # Developer shortcut: `python shim/build/native.py host preload` rebuilds just those artifacts in place
    # (into ucudnn/_lib), without pip and without touching the others.
    import importlib
    import sys

    targets = sys.argv[1:] or ["host", "preload", "planner_embed"]
    for target in targets:
        for path in importlib.import_module(target).build(ROOT / "ucudnn" / "_lib"):
            print("built", path)
