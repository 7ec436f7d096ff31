"""A Python host for a framework library (tests/preload/c/framework_driver.c built with -DFRAMEWORK_LIBRARY), run by
test_dlopen.py with or without LD_PRELOAD=libucudnn.so, or under ``ucudnn run``: it loads the library RTLD_LOCAL, as
Python loads XLA's plugin or TensorFlow's extension module, and calls its framework_main with the remaining
arguments (the library prints its JSON report on stdout). Under the preload library the planner is this
interpreter's (the shim imports ucudnn._runtime at its first plan-cache miss), as in a JAX or TensorFlow program.

Usage: framework_host.py LIBRARY [--global] KEY=VALUE... (--global: RTLD_GLOBAL, as some extension modules are)
"""

from __future__ import annotations

import ctypes
import os
import sys


def main() -> int:
    rest = sys.argv[2:]
    scope = os.RTLD_GLOBAL if rest[:1] == ["--global"] else os.RTLD_LOCAL
    lib = ctypes.CDLL(sys.argv[1], mode=scope | os.RTLD_NOW)
    args = [b"framework_driver", *(a.encode() for a in rest if a != "--global")]
    argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    sys.stdout.flush()
    return int(lib.framework_main(len(args), argv))


if __name__ == "__main__":
    sys.exit(main())
