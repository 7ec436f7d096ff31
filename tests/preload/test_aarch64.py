"""The preload library on AArch64 (NVIDIA's Grace Hopper and Grace Blackwell machines, other Arm servers), tested
on this x86-64 machine: the library, the host backend and the test programs built with a cross compiler and run
under qemu-user.

What differs by architecture is the dlsym interposer's assembly entry (shim/control/uc_dlsym.c) and dlsym's version
before glibc 2.34 (GLIBC_2.17 there); the rest is portable C, run here all the same:

- c/dlsym_probe.c, test_dlopen.py's probe: ``dlsym(RTLD_NEXT, ...)`` from another library finds what follows that
  library through the interposer (the preload library built at -O2 and at -O0), references bound to
  ``dlsym@GLIBC_2.17`` and ``@GLIBC_2.34``, eight threads, lookups made before the constructors ran, another
  interposer preloaded after ours;
- c/framework_driver.c: a framework that dlopens cuDNN ``RTLD_LOCAL`` and takes every function with ``dlsym`` (XLA's
  way), one convolution through the legacy API and one as a graph: seen through ``dlsym``, results cuDNN alone's;
- c/conv_driver.c: linked against cuDNN (PyTorch's way), micro-batched by a fixed C planner, results cuDNN alone's.

No Python runs on the AArch64 side (there is no AArch64 interpreter here), so the legacy path plans with a C
planner or the built-in fallback, not ucudnn's planner; the graph path splits without one.

Needs ``aarch64-linux-gnu-gcc``, ``qemu-aarch64`` with an AArch64 glibc in /usr/aarch64-linux-gnu (Debian and
Ubuntu: ``apt-get install gcc-aarch64-linux-gnu qemu-user``) and AArch64's ``libscipy_openblas.so`` for the host
backend (``UCUDNN_TEST_AARCH64_BLAS``, default build/aarch64/): ``bash .ci/aarch64`` gets all three. Skipped without
them, failed instead where ``UCUDNN_TEST_AARCH64=required`` (``.ci/run``).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests._elf import needed, readelf
from tests._env import missing

from ._dlsym_probe import build_probe, check_probe, rpath
from .conftest import C_DIR, ROOT, assert_close, base_env, compile_c, last_json, preload_build

CC = os.environ.get("UCUDNN_TEST_AARCH64_CC", "aarch64-linux-gnu-gcc")
SYSROOT = Path(os.environ.get("UCUDNN_TEST_AARCH64_SYSROOT", "/usr/aarch64-linux-gnu"))
BLAS = Path(
    os.environ.get("UCUDNN_TEST_AARCH64_BLAS")
    or ROOT / "build" / "aarch64" / "scipy_openblas32" / "lib" / "libscipy_openblas.so"
)
REQUIRED_VAR = "UCUDNN_TEST_AARCH64"
# The CPU qemu emulates: a Neoverse N1 (Armv8.2, the Arm server core of AWS Graviton2 and Ampere Altra). qemu 7.2's
# default, "max", announces SME, and the OpenBLAS kernels chosen for it computed wrong products under that
# emulation (a 37 x 29 x 45 sgemm with padded rows off by 1e37; exact on n1, a57 and a64fx): not ucudnn's to test.
CPU = os.environ.get("UCUDNN_TEST_AARCH64_CPU", "neoverse-n1")

# The build scripts, run with CC set to the cross compiler (they read it at each compilation).
BUILD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import host, preload
out, blas = Path(sys.argv[2]), Path(sys.argv[3])
host.build(out / "host", blas)
preload.build(out / "preload")
preload.build(out / "o0", extra_cflags=("-O0",))
"""

# As in test_dlopen.py: a layer whose fastest forward and backward-data algorithms at N = 16 need more workspace
# than the limit.
LAYER = ["n=16", "c=32", "k=64", "in=16,16", "query=get"]
LIMIT = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB"}
HOOKED_LOOKUPS = 9  # framework_driver.c's: the op's Get*_v7, workspace size and execution, and six graph calls


@dataclass(frozen=True)
class Cross:
    qemu: str
    preload: Path
    preload_o0: Path
    host: Path  # the host backend's libcudnn.so.9, with AArch64's OpenBLAS beside it
    bin: Path  # where the test programs go


@pytest.fixture(scope="module")
def cross(tmp_path_factory: pytest.TempPathFactory) -> Cross:
    if platform.machine() == "aarch64":
        pytest.skip("an AArch64 machine: test_dlopen.py and the rest of the suite run natively")
    if os.environ.get("UCUDNN_BUILD_SANITIZE") == "address":
        pytest.skip("AddressSanitizer's shadow memory does not run under qemu-user")
    qemu = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
    wanted = {
        CC: shutil.which(CC) is not None,
        "qemu-aarch64 (qemu-user)": qemu is not None,
        f"an AArch64 glibc in {SYSROOT}": (SYSROOT / "lib" / "ld-linux-aarch64.so.1").exists(),
        f"AArch64's libscipy_openblas.so at {BLAS}": BLAS.exists(),
    }
    lacking = [what for what, ok in wanted.items() if not ok]
    if lacking or qemu is None:
        missing(f"the AArch64 tier needs {', '.join(lacking)}: `bash .ci/aarch64` installs them", REQUIRED_VAR)
    out = tmp_path_factory.mktemp("aarch64")
    proc = subprocess.run([sys.executable, "-c", BUILD, str(ROOT / "shim" / "build"), str(out), str(BLAS)],
                          env={**os.environ, "CC": CC}, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (out / "bin").mkdir()
    return Cross(qemu, out / "preload" / "libucudnn.so", out / "o0" / "libucudnn.so", out / "host" / "libcudnn.so.9",
                 out / "bin")  # fmt: skip


def run_aarch64(cross: Cross, program: Path, args: list[str], *, preload: str = "", env: dict[str, str] | None = None,
                cpu: str = CPU) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``program args`` under qemu-user; ``preload``: the guest's LD_PRELOAD (qemu's own process takes none)."""
    cmd = [cross.qemu, "-cpu", cpu, "-L", str(SYSROOT)]
    if preload:
        cmd += ["-E", f"LD_PRELOAD={preload}"]
    proc = subprocess.run([*cmd, str(program), *args], env={**base_env(), **(env or {})}, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, f"{program.name} {args}: rc={proc.returncode}\n{proc.stderr[-4000:]}"
    return proc


def test_the_aarch64_library_exports_dlsym_unversioned_and_needs_only_libc(cross: Cross) -> None:
    """Built for AArch64, dlsym among its exports (it has the assembly entry there), nothing versioned, and no
    library beyond libc's (and the sanitizer's runtime in a sanitizer build)."""
    build = preload_build()
    for lib in (cross.preload, cross.preload_o0):
        assert re.search(r"Machine:\s+AArch64", readelf(lib, "-h")), lib
        defined = [
            fields[7]
            for line in readelf(lib, "--dyn-syms", "-W").splitlines()
            if len(fields := line.split()) >= 8 and fields[6] != "UND" and fields[3] in ("FUNC", "OBJECT")
        ]
        assert not [s for s in defined if "@" in s], defined
        assert sorted(defined) == sorted(build.hook_names() + build.libc_names() + build.control_names())
        assert "dlsym" in defined
        runtime = build.SANITIZERS[build.sanitizer()][1]
        assert set(needed(lib)) <= {"libc.so.6", "libdl.so.2", "libpthread.so.0"} | runtime, lib


@pytest.fixture(scope="module")
def probe(cross: Cross) -> Path:
    return build_probe(cross.bin, cross.host.parent, cc=CC, target="aarch64")


@pytest.mark.parametrize("preload", ["none", "built", "O0", "chained"])
def test_rtld_next_versions_threads_and_early_lookups_on_aarch64(cross: Cross, probe: Path, preload: str) -> None:
    chain = {
        "none": "",
        "built": str(cross.preload),
        "O0": str(cross.preload_o0),
        "chained": f"{cross.preload} {probe.with_name('libdlsym_counter.so')}",
    }[preload]
    check_probe(json.loads(run_aarch64(cross, probe, ["8", "2000"], preload=chain).stdout), preload)


def test_the_entry_signs_its_return_address_where_the_cpu_authenticates(cross: Cross, probe: Path) -> None:
    """On qemu's "max" CPU, which implements pointer authentication and BTI, PACIASP and AUTIASP really sign and
    check x30: a mismatch between them would fault at the entry's return or jump. The probe makes no convolution,
    so the emulated SME kernels of OpenBLAS (see CPU) never run."""
    check_probe(json.loads(run_aarch64(cross, probe, ["8", "2000"], preload=str(cross.preload), cpu="max").stdout),
                "built")  # fmt: skip


@pytest.fixture(scope="module")
def xla_program(cross: Cross) -> Path:
    """framework_driver.c with private trampolines, finding the host backend by DT_RPATH (test_dlopen.py's)."""
    sources = (C_DIR / "framework_driver.c", C_DIR / "driver_common.c", C_DIR / "cudnn_dlopen.c")
    includes = ("-I", str(C_DIR), "-I", str(ROOT / "tests" / "host"), "-I", str(ROOT / "shim"))
    return compile_c(*sources, output=cross.bin / "xla_program", link_cudnn=False, cc=CC,
                     extra=("-fvisibility=hidden", *includes, rpath(cross.host.parent)))  # fmt: skip


@pytest.mark.parametrize("op", ["fwd", "bwd_data"])
def test_a_framework_that_dlopens_cudnn_is_seen_on_aarch64(cross: Cross, xla_program: Path, tmp_path: Path,
                                                           op: str) -> None:  # fmt: skip
    """Every hooked name the framework looks up comes back as the hook; the legacy call and the graph run through
    the preload library as the framework's own calls, with cuDNN alone's results."""
    env = {"UCUDNN_DATABASE": str(tmp_path / "cache.sqlite")}
    outs = {}
    reports = {}
    for under in (False, True):
        out = tmp_path / ("under" if under else "alone")
        preload, settings = (str(cross.preload), {**env, **LIMIT}) if under else ("", env)
        proc = run_aarch64(cross, xla_program, [f"op={op}", *LAYER, f"out={out}"], preload=preload, env=settings)
        reports[under] = last_json(proc.stdout)
        assert reports[under]["failures"] == 0 and reports[under]["graph"]["status"] == 0, reports[under]
        outs[under] = [np.fromfile(f"{out}.{part}", dtype=np.float32) for part in ("legacy", "graph")]
    for got, ref in zip(outs[True], outs[False], strict=True):
        assert_close(got, ref, "float")
    assert reports[False]["foreign_lookups"] == 0 and "stats" not in reports[False]
    s = reports[True]["stats"]
    assert s["dlsym_hooked"] == reports[True]["foreign_lookups"] >= HOOKED_LOOKUPS, s
    assert s["real_library"] == str(cross.host), s
    # Seen and planned: the legacy call by the built-in fallback (no planner on this side; its Get*_v7 is planned
    # the same way), the graph split.
    assert s["calls"] >= 1 and s["planned"] == s["calls"] and s["fallback_plans"] >= s["planned"], s
    assert s["planner_calls"] == 0, s
    assert s["graph_conv_plans"] >= 1 and s["graph_split_plans"] >= 1 and s["graph_micro_batches"] >= 2, s


# op, plan (b:algo,... summing to n = 8), extra arguments: test_exec.py's cases, one per op
CASES = [
    ("fwd", "3:0,2:1,3:2", ["beta=0.5", "layout=nhwc"]),
    ("bwd_data", "3:1,2:0,3:1", ["beta=0.5", "groups=2"]),
    ("bwd_filter", "3:5,2:3,3:5", ["beta=0.5"]),  # WINOGRAD_NONFUSED: the sum over tiles spans micro-batches
]


@pytest.fixture(scope="module")
def conv_driver(cross: Cross) -> Path:
    return compile_c(C_DIR / "conv_driver.c", C_DIR / "driver_common.c", output=cross.bin / "conv_driver",
                     link_cudnn=False, cc=CC,
                     extra=(f"-L{cross.host.parent}", "-l:libcudnn.so.9", rpath(cross.host.parent)))  # fmt: skip


@pytest.mark.parametrize(("op", "plan", "extra"), CASES, ids=[c[0] for c in CASES])
def test_a_linked_framework_is_micro_batched_on_aarch64(cross: Cross, conv_driver: Path, tmp_path: Path, op: str,
                                                       plan: str, extra: list[str]) -> None:  # fmt: skip
    """conv_driver.c linked against cuDNN (as PyTorch links it), its convolution run in the micro-batches of a fixed
    C planner."""
    args = [f"op={op}", "n=8", "ws=4000000", *extra]
    alone = run_aarch64(cross, conv_driver, [*args, f"out={tmp_path / 'alone'}"])
    cache = {"UCUDNN_DATABASE": str(tmp_path / "cache.sqlite")}
    under = run_aarch64(cross, conv_driver, [*args, "planner=fixed", f"plan={plan}", f"out={tmp_path / 'under'}"],
                        preload=str(cross.preload), env=cache)  # fmt: skip
    assert "stats" not in last_json(alone.stdout)
    report = last_json(under.stdout)
    s = report["stats"]
    assert s["calls"] == 1 and s["planned"] == 1 and s["rejected_plans"] == 0, s
    assert s["micro_batches"] == plan.count(",") + 1, s
    assert [(m["batch"], m["algo"]) for m in report["last_plan"]["micro_batches"]] == [
        tuple(int(v) for v in mb.split(":")) for mb in plan.split(",")
    ]
    got, ref = (np.fromfile(tmp_path / f"{side}.0", dtype=np.float32) for side in ("under", "alone"))
    assert_close(got, ref, "float")
