"""The AddressSanitizer tier (``UCUDNN_BUILD_SANITIZE=address``, docs/testing.md): the native libraries are built
with ``-fsanitize=address,undefined``, and ASan's runtime must come before libc in every process that loads them,
or libc's ``malloc`` serves memory that ASan's ``free`` then refuses. The tier runs pytest with
``LD_PRELOAD="$(python -m tests._sanitizer)"`` (``preload_list``); the tests set ``LD_PRELOAD`` for their children
themselves (the preload library, or nothing), so here every child process the tests start gets that list put
first in it, whatever the test chose after it, with this process's sanitizer options.

The runtime's ``dlopen`` interceptor makes itself the caller glibc sees, so a bare name would no longer be searched
in the calling object's DT_RPATH/DT_RUNPATH (cuDNN's front library finds its sub-libraries that way):
``sanitizer/dlopen_as_caller.c``, preloaded just before the runtime, gives such a name the caller's own search."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.host._cbuild import cached_library

BUILD_VAR = "UCUDNN_BUILD_SANITIZE"
OPTIONS = ("ASAN_OPTIONS", "UBSAN_OPTIONS")
DLOPEN_AS_CALLER = Path(__file__).with_name("sanitizer") / "dlopen_as_caller.c"


def dlopen_as_caller() -> str:
    """``sanitizer/dlopen_as_caller.c``, built once per source."""
    return str(cached_library("dlopen_as_caller", [DLOPEN_AS_CALLER], [str(DLOPEN_AS_CALLER)]))


def preload_list() -> list[str]:
    """The LD_PRELOAD the tier runs pytest with: the dlopen helper, ASan's runtime (found by the compiler), and
    libstdc++, so that the runtime finds the C++ functions it intercepts at its start (``__cxa_throw``: a C++
    library dlopened later, such as cudnn_frontend's Python module, would throw into a NULL function)."""
    runtime = subprocess.run(["gcc", "-print-file-name=libasan.so"], check=True, capture_output=True, text=True)
    return [dlopen_as_caller(), runtime.stdout.strip(), "libstdc++.so.6"]


def tier_preload(environ: Mapping[str, str]) -> list[str] | None:
    """What every process of the tier preloads first, where the build is the address one and this process was
    started with it; None for any other build. An address build run without it is an error that says how to run
    the tier."""
    if environ.get(BUILD_VAR) != "address":
        return None
    first = preload_list()
    entries = environ.get("LD_PRELOAD", "").replace(":", " ").split()
    if entries[: len(first)] != first:
        raise RuntimeError(
            f'{BUILD_VAR}=address: run pytest with LD_PRELOAD="$(python -m tests._sanitizer)" (the dlopen helper, '
            "ASan's runtime and libstdc++), as docs/testing.md shows"
        )
    return first


def for_child(env: Mapping[str, str], first: list[str], options: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``first`` at the head of its LD_PRELOAD (and nowhere else in it), and ``options`` where it has
    none of its own."""
    rest = [e for e in env.get("LD_PRELOAD", "").replace(":", " ").split() if e not in first]
    return {**options, **env, "LD_PRELOAD": " ".join([*first, *rest])}


_child: tuple[list[str], dict[str, str]] | None = None


def as_child_gets(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as a child process the tests start with it gets it: unchanged outside the address build."""
    return dict(env) if _child is None else for_child(env, *_child)


def install(environ: Mapping[str, str]) -> None:
    """Under the address build, make every ``subprocess.Popen`` given an environment start its process as above (a
    child given none inherits this process's, which has the runtime)."""
    global _child
    first = tier_preload(environ)
    if first is None or _child is not None:
        return
    _child = (first, {k: environ[k] for k in OPTIONS if k in environ})
    original = subprocess.Popen.__init__

    def init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        if kwargs.get("env") is not None:
            kwargs["env"] = as_child_gets(kwargs["env"])
        original(self, *args, **kwargs)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]


if __name__ == "__main__":
    print(" ".join(preload_list()))
