"""c/dlsym_probe.c and the libraries it links, built and judged alike for this machine (test_dlopen.py) and for
AArch64 under qemu-user (test_aarch64.py): what the dlsym interposer must leave alone, and what it must answer."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from tests._elf import readelf

from .conftest import C_DIR, compile_c

# dlsym's version before glibc 2.34, by target: the probe binds it and dlsym@GLIBC_2.34 both.
OLD_DLSYM = {"x86_64": "GLIBC_2.2.5", "aarch64": "GLIBC_2.17"}


def rpath(*dirs: Path) -> str:
    """DT_RPATH (not RUNPATH), as XLA's plugin has: it also governs the dlopen calls the object makes."""
    return "-Wl,--disable-new-dtags,-rpath," + ":".join(str(d) for d in dirs)


def build_probe(out: Path, cudnn_dir: Path, *, cc: str | None = None, target: str | None = None) -> Path:
    """Build the probe into ``out``, finding ``libcudnn.so.9`` in ``cudnn_dir``: the program, libnext_a/b.so,
    libearly.so and libdlsym_counter.so (the chained interposer) beside it. ``cc``: a cross compiler for ``target``
    (``uname -m``'s name; default this machine)."""
    shared = ("-fPIC", "-shared")
    compile_c(C_DIR / "dlsym_counter.c", output=out / "libdlsym_counter.so", link_cudnn=False, extra=shared, cc=cc)
    for who in ("a", "b"):
        compile_c(C_DIR / "dlsym_next.c", output=out / f"libnext_{who}.so", link_cudnn=False,
                  extra=(*shared, f'-DWHO="{who}"'), cc=cc)  # fmt: skip
    compile_c(C_DIR / "dlsym_early.c", output=out / "libearly.so", link_cudnn=False,
              extra=(*shared, rpath(cudnn_dir)), cc=cc)  # fmt: skip
    program = compile_c(C_DIR / "dlsym_probe.c", output=out / "dlsym_probe", link_cudnn=False,
                        extra=(f"-L{out}", "-Wl,--no-as-needed", "-l:libnext_a.so", "-l:libnext_b.so",
                               "-l:libearly.so", rpath(out, cudnn_dir)), cc=cc)  # fmt: skip
    syms = readelf(program, "--dyn-syms", "-W")
    old = OLD_DLSYM.get(target or platform.machine(), "?")
    assert f"dlsym@{old}" in syms and "dlsym@GLIBC_2.34" in syms, "the probe must bind both versions"
    return program


def check_probe(r: dict[str, Any], preload: str) -> None:
    """The probe's report ``r`` run with ``preload``: "none", "built" (the preload library), "O0" (built at -O0) or
    "chained" (another dlsym interposer preloaded after it)."""
    if preload == "chained":
        assert r["chained"] > 8 * 2000, r  # at least the threads' unhooked and RTLD_NEXT lookups
    else:
        assert r["chained"] == -1
        assert r["next"] == "b"  # libnext_a's RTLD_NEXT lookup found what follows libnext_a
    hooked = "cudnn" if preload == "none" else "hook"
    for answers in (r["old"], r["v2_34"], r["threads"]["answers"], r["early"]["answers"]):
        assert answers == [hooked, "cudnn"], r
    assert r["threads"]["mismatches"] == 0
    assert r["early"]["status"] == 2000  # the real library's refusal of NULL arguments, hooked or not
    if preload == "none":
        assert r["early"]["before_constructors"] == -1 and "stats" not in r
    else:
        # The constructor's lookup came before the preload library's constructors, and its call reached the hook.
        assert r["early"]["before_constructors"] == 1 and r["stats"]["calls"] == 1, r
        assert r["stats"]["dlsym_hooked"] == 4 + 8 * 2000 * 2, r["stats"]
