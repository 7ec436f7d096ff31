"""Frameworks that dlopen cuDNN (JAX/XLA, TensorFlow, ONNX Runtime, PaddlePaddle) reach the preload library through
its dlsym.

The programs here never link libcudnn: c/cudnn_dlopen.c gives them trampolines that dlopen ``libcudnn.so.9``
RTLD_LOCAL (through their DT_RPATH, as XLA's plugin finds the wheel's copy) and take every function with
``dlsym(handle, name)`` -- hidden, as in XLA, or exported stubs called through the library's own PLT, as in
TensorFlow. c/framework_driver.c runs one convolution through the legacy API and as a graph; each is run without
and with ``LD_PRELOAD=libucudnn.so``, the outputs compared and the stats read. c/dlsym_probe.c checks what the
interposer must leave alone: ``dlsym(RTLD_NEXT, ...)`` issued by other libraries (with the preload library built
at -O0 too), callers bound to ``dlsym@GLIBC_2.2.5`` (AArch64: ``@GLIBC_2.17``) and ``@GLIBC_2.34``, threads, and
lookups made before the preload library's constructors ran. A stand-in of cuDNN 9's front library, which dlsyms
the same names in a sub-library, checks that the dispatcher's own lookups are never redirected.
c/dlclose_reopen.c unloads cuDNN and loads it again between convolutions. test_aarch64.py runs the probe and a
framework like these on AArch64, under qemu-user.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._elf import needed
from tests._env import project_pythonpath
from ucudnn import _paths

from ._dlsym_probe import build_probe, check_probe, rpath
from .conftest import C_DIR, ROOT, assert_close, base_env, compile_c, last_json, preload_build

HOST_DIR = ROOT / "tests" / "host"
SHIM = ROOT / "shim"

pytestmark = pytest.mark.skipif(
    not preload_build().interposes_libc(),
    reason=f"the preload library interposes dlsym on x86-64 and AArch64 only (this is {platform.machine()})",
)

# A layer whose fastest forward/backward-data algorithm at N=16 needs more workspace than the limit, which fits it
# at N=8 (as in test_planner_paths.py): the planner must split.
LAYER = ["n=16", "c=32", "k=64", "in=16,16", "query=get"]
LIMIT = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB"}
# The hooked names framework_driver.c looks up: the op's Get*_v7, workspace size and execution, and six graph calls.
HOOKED_LOOKUPS = 9
FRAMEWORK_SOURCES = (C_DIR / "framework_driver.c", C_DIR / "driver_common.c", C_DIR / "cudnn_dlopen.c")
INCLUDES = ("-I", str(C_DIR), "-I", str(HOST_DIR), "-I", str(SHIM))


@dataclass(frozen=True)
class Builds:
    xla_program: Path  # framework_driver with private trampolines, finding the host backend by DT_RPATH
    xla_library: Path  # the same as a library exporting framework_main, for a Python host
    tf_library: Path  # exported stubs called through the library's own PLT (TensorFlow's design)
    front_program: Path  # framework_driver finding the dispatcher stand-in by DT_RPATH
    front: Path  # the stand-in of cuDNN 9's front library (libcudnn.so.9) and its sub-library


@pytest.fixture(scope="session")
def builds(host_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Builds:
    out = tmp_path_factory.mktemp("dlopen")
    lib_dir = host_lib.parent
    program_flags = ("-fvisibility=hidden", *INCLUDES)
    library_flags = ("-fPIC", "-shared", "-DFRAMEWORK_LIBRARY", *INCLUDES, rpath(lib_dir))
    xla_program = compile_c(*FRAMEWORK_SOURCES, output=out / "xla_program", link_cudnn=False,
                            extra=(*program_flags, rpath(lib_dir)))  # fmt: skip
    xla_library = compile_c(*FRAMEWORK_SOURCES, output=out / "libxla_like.so", link_cudnn=False,
                            extra=("-fvisibility=hidden", *library_flags))  # fmt: skip
    tf_library = compile_c(*FRAMEWORK_SOURCES, output=out / "libtf_like.so", link_cudnn=False, extra=library_flags)
    # cuDNN 9's front library dlopens its sub-libraries and dlsyms the same names in them: the stand-in does so
    # with the host backend under the sub-library's name, all names at its first use (cudnnCreate, not hooked).
    front = out / "front"
    front.mkdir()
    (front / "libcudnn_cnn.so.9").symlink_to(host_lib)
    (front / "libscipy_openblas.so").symlink_to(lib_dir / "libscipy_openblas.so")  # the backend's $ORIGIN
    compile_c(C_DIR / "cudnn_dlopen.c", output=front / "libcudnn.so.9", link_cudnn=False,
              extra=("-fPIC", "-shared", '-DCUDNN_DLOPEN_NAME="libcudnn_cnn.so.9"', "-DCUDNN_DLOPEN_EAGER", "-I",
                     str(SHIM), "-Wl,-soname,libcudnn.so.9", rpath(Path("$ORIGIN"))))  # fmt: skip
    front_program = compile_c(*FRAMEWORK_SOURCES, output=out / "front_program", link_cudnn=False,
                              extra=(*program_flags, rpath(front)))  # fmt: skip
    for binary in (xla_program, xla_library, tf_library, front_program):
        assert not [n for n in needed(binary) if n.startswith("libcudnn")], f"{binary.name} links cuDNN"
    return Builds(xla_program, xla_library, tf_library, front_program, front)


@dataclass
class Outcome:
    report: dict[str, Any]
    stderr: str
    legacy: np.ndarray
    graph: np.ndarray

    @property
    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.report["stats"]
        return stats


def run(tmp_path: Path, command: list[str], args: list[str], *, preload: bool, env: dict[str, str] | None = None,
        ) -> Outcome:  # fmt: skip
    out = tmp_path / f"out{len(list(tmp_path.glob('out*.legacy')))}"
    full = base_env()
    full["PYTHONPATH"] = project_pythonpath(full)
    full["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
    if preload:
        full["LD_PRELOAD"] = str(_paths.PRELOAD)
        full.update(env or {})
    proc = subprocess.run([*command, *args, f"out={out}"], env=full, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    report = last_json(proc.stdout)
    assert report["failures"] == 0 and report["graph"]["status"] == 0, report
    legacy, graph = (np.fromfile(f"{out}.{part}", dtype=np.float32) for part in ("legacy", "graph"))
    return Outcome(report, proc.stderr, legacy, graph)


def assert_micro_batched(alone: Outcome, under: Outcome) -> None:
    """Same outputs as cuDNN alone, both calls planned and split, every hooked name reached through dlsym."""
    assert_close(under.legacy, alone.legacy, "float")
    assert_close(under.graph, alone.graph, "float")
    s = under.stats
    assert s["calls"] >= 1 and s["planned"] == s["calls"] and s["micro_batches"] > s["planned"], s
    assert s["graph_split_plans"] >= 1 and s["graph_micro_batches"] >= 2, s
    assert s["dlsym_hooked"] == under.report["foreign_lookups"] >= HOOKED_LOOKUPS, s
    assert alone.report["foreign_lookups"] == 0 and "stats" not in alone.report


# Not bwd_filter: its fastest host algorithm needs only a per-sample workspace, so nothing is gained by splitting.
@pytest.mark.parametrize("op", ["fwd", "bwd_data"])
def test_a_c_framework_that_dlopens_cudnn_is_planned_and_micro_batched(builds: Builds, tmp_path: Path, op: str) -> None:
    """A C/C++ host (the embedded planner plans): legacy and graph calls, all through dlsym'd pointers."""
    args = [f"op={op}", *LAYER]
    alone = run(tmp_path, [str(builds.xla_program)], args, preload=False)
    under = run(tmp_path, [str(builds.xla_program)], args, preload=True, env=LIMIT)
    assert_micro_batched(alone, under)
    assert under.stats["real_library"] == str(_paths.HOST_CUDNN)


def test_a_python_host_plans_through_its_interpreter(builds: Builds, tmp_path: Path) -> None:
    """The framework library loaded RTLD_LOCAL by Python, as JAX loads XLA's plugin."""
    host = [sys.executable, str(Path(__file__).with_name("framework_host.py")), str(builds.xla_library)]
    alone = run(tmp_path, host, LAYER, preload=False)
    under = run(tmp_path, host, LAYER, preload=True, env=LIMIT)
    assert_micro_batched(alone, under)
    assert under.stats["planner_calls"] >= 1 and under.stats["fallback_plans"] == 0


@pytest.mark.parametrize("scope", ["local", "global"])
def test_tensorflow_like_stubs_that_load_cudnn_after_a_hooked_call(builds: Builds, tmp_path: Path, scope: str) -> None:
    """Exported stubs called through the library's PLT, which the preload library binds; the first call is a hooked
    one, before any stub has loaded cuDNN. Loaded RTLD_LOCAL nothing finds a real library then: the caller's own
    stub runs it (and loads cuDNN), and the next call finds the library. Loaded RTLD_GLOBAL the stubs are what
    RTLD_NEXT finds behind the hooks. Either way every call succeeds, as without the preload library."""
    host = [sys.executable, str(Path(__file__).with_name("framework_host.py")), str(builds.tf_library)]
    if scope == "global":
        host.append("--global")
    args = [*LAYER, "probe_first=1"]
    alone = run(tmp_path, host, args, preload=False)
    under = run(tmp_path, host, args, preload=True, env=LIMIT)
    assert alone.report["probe"] == under.report["probe"] == [0, 0]
    assert "no real cuDNN found" not in under.stderr
    assert_close(under.legacy, alone.legacy, "float")
    assert_close(under.graph, alone.graph, "float")
    s = under.stats
    assert s["planned"] == s["calls"] >= 1 and s["micro_batches"] > s["planned"] and s["graph_split_plans"] >= 1, s
    # Through the PLT, not through dlsym: the stubs' own lookups run under the shim's guard and pass through.
    assert s["dlsym_hooked"] == 0 and under.report["foreign_lookups"] == 0
    if scope == "local":
        assert s["missing_real"] == 1 and s["real_library"] == str(_paths.HOST_CUDNN), s
    else:
        assert s["missing_real"] == 0 and s["real_library"] == str(builds.tf_library), s


def test_the_front_librarys_own_lookups_in_its_sub_library_are_never_redirected(builds: Builds, tmp_path: Path) -> None:
    """The stand-in dlsyms every name in its sub-library at its first call (cudnnCreate, so the shim's guard is down);
    had any come back as a hook, the hook would forward to the stand-in, which would call the hook again."""
    args = ["op=fwd", *LAYER]
    alone = run(tmp_path, [str(builds.front_program)], args, preload=False)
    under = run(tmp_path, [str(builds.front_program)], args, preload=True, env=LIMIT)
    assert alone.report["library_foreign_lookups"] == under.report["library_foreign_lookups"] == 0
    assert_micro_batched(alone, under)
    assert under.stats["real_library"] == str(builds.front / "libcudnn.so.9")


def test_ctypes_lookups_on_cudnn_are_hooked_and_unhooked_cdll_is_not(tmp_path: Path) -> None:
    code = (
        "import ctypes, json, sys; from ucudnn import _paths; from ucudnn.cudnn import UnhookedCDLL\n"
        "def where(f):\n"
        "    info = (ctypes.c_char_p * 4)()\n"
        "    ok = ctypes.CDLL(None).dladdr(ctypes.cast(f, ctypes.c_void_p), info)\n"
        "    return info[0].decode() if ok else ''\n"
        "plain, unhooked = ctypes.CDLL(str(_paths.HOST_CUDNN)), UnhookedCDLL(str(_paths.HOST_CUDNN))\n"
        "print(json.dumps([where(plain.cudnnConvolutionForward), where(unhooked.cudnnConvolutionForward),\n"
        "                  where(plain.cudnnCreate)]))\n"
    )
    env = base_env()
    env |= {"PYTHONPATH": project_pythonpath(env), "LD_PRELOAD": str(_paths.PRELOAD)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    plain, unhooked, unhooked_name = json.loads(proc.stdout)
    assert Path(plain) == _paths.PRELOAD
    assert Path(unhooked) == Path(unhooked_name) == _paths.HOST_CUDNN


# ---- what the interposer leaves alone ----


@pytest.fixture(scope="session")
def probe(host_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_probe(tmp_path_factory.mktemp("dlsym_probe"), host_lib.parent)


@pytest.fixture(scope="session")
def preload_o0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The preload library built at -O0: a C wrapper around the real dlsym would be the caller of every RTLD_NEXT
    lookup there (at -O2 the compiler may happen to emit a tail jump)."""
    (lib,) = preload_build().build(tmp_path_factory.mktemp("o0"), extra_cflags=("-O0",))
    return Path(lib)


@pytest.mark.parametrize("preload", ["none", "built", "O0", "chained"])
def test_rtld_next_versions_threads_and_early_lookups(probe: Path, preload_o0: Path, preload: str) -> None:
    env = base_env()
    if preload != "none":
        env["LD_PRELOAD"] = str(preload_o0 if preload == "O0" else _paths.PRELOAD)
    if preload == "chained":  # another interposer after ours still gets the lookups that pass through ours
        env["LD_PRELOAD"] += f" {probe.with_name('libdlsym_counter.so')}"
    proc = subprocess.run([str(probe), "8", "2000"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    check_probe(json.loads(proc.stdout), preload)


def test_a_framework_that_unloads_cudnn_and_loads_it_again(host_lib: Path, tmp_path: Path) -> None:
    """A process that dlcloses cuDNN and later dlopens it again (a provider library unloaded and reloaded). Alone,
    each dlclose unmaps the library. Under the preload library it stays mapped: the preload library holds its own
    reference to the copy its hooks forward to, so no hook ever calls into unmapped code, and every round's
    convolution is seen through dlsym, planned and computed as alone."""
    exe = compile_c(C_DIR / "dlclose_reopen.c", output=tmp_path / "dlclose_reopen", link_cudnn=False,
                    extra=(rpath(host_lib.parent),))  # fmt: skip
    rounds = 3
    results = {}
    for preload in (False, True):
        env = base_env() | {"UCUDNN_DATABASE": str(tmp_path / "cache.sqlite")}
        stats_file = tmp_path / "stats.json"
        if preload:
            env |= {"LD_PRELOAD": str(_paths.PRELOAD), "UCUDNN_STATS_FILE": str(stats_file)}
        out = tmp_path / ("under" if preload else "alone")
        proc = subprocess.run([str(exe), f"out={out}", f"rounds={rounds}"], env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert proc.returncode == 0, (preload, proc.stdout, proc.stderr)
        report = json.loads(proc.stdout.splitlines()[-1])
        assert [r["status"] for r in report["rounds"]] == [0] * rounds, report
        assert [r["mapped_after_close"] for r in report["rounds"]] == [int(preload)] * rounds, report
        results[preload] = [np.fromfile(f"{out}.{i}", dtype=np.float32) for i in range(rounds)]
    for alone, under in zip(results[False], results[True], strict=True):
        assert_close(under, alone, "float")
    stats = json.loads(stats_file.read_text())
    assert stats["calls"] == rounds and stats["planned"] == rounds, stats
    assert stats["dlsym_hooked"] == 2 * rounds, stats  # Get*_v7 and the execution, looked up again each round


# ---- the user's view ----


def test_ucudnn_run_reaches_a_python_framework_that_dlopens_cudnn(builds: Builds, tmp_path: Path) -> None:
    env = base_env()
    env |= {"PYTHONPATH": project_pythonpath(env), "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite")}
    host = [sys.executable, str(Path(__file__).with_name("framework_host.py")), str(builds.xla_library), *LAYER]
    cmd = [sys.executable, "-m", "ucudnn.cli", "run", "--workspace", "2500KiB", "--stats-file", "s.json", "--", *host]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["dlsym_hooked"] >= HOOKED_LOOKUPS and stats["divided_calls"] == stats["calls"] >= 1, stats
    summary = r"^ucudnn: 1 kernel\(s\), 1 convolution call\(s\), .* in all: 1 micro-batched, 0 undivided"
    assert re.search(summary, proc.stderr, re.M)
    assert "no cuDNN convolution call reached the preload library" not in proc.stderr
