"""Compile a test-only shared library once per source state (a hash of its inputs names the file)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

C_FLAGS = ("-std=c11", "-g", "-fPIC", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-shared")


def cached_library(name: str, inputs: Sequence[Path], args: Sequence[str]) -> Path:
    """``lib<name>-<hash>.so`` built by ``gcc C_FLAGS args -o ...`` unless a build of the same inputs exists.

    ``inputs`` are every file the build reads (sources and headers); the library is written to a temporary name
    and renamed, so concurrent test processes never load a half-written file.
    """
    digest = hashlib.sha256()
    for f in inputs:
        digest.update(f.name.encode())
        digest.update(f.read_bytes())
    digest.update("\0".join(args).encode())
    out_dir = Path(tempfile.gettempdir()) / f"ucudnn-test-libs-{os.getuid()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"lib{name}-{digest.hexdigest()[:16]}.so"
    if not lib.exists():
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["gcc", *C_FLAGS, *args, "-o", str(tmp)], check=True)
        tmp.replace(lib)
    return lib
