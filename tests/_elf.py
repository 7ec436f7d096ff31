"""What the dynamic linker will read from a built program or library: the libraries it needs and the names it
imports (binutils' readelf and nm, which every compiler the tests use brings along)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


def readelf(path: Path, *options: str) -> str:
    """What ``readelf`` prints for ``path`` with these options (``-d``: the dynamic section)."""
    return subprocess.run(["readelf", *options, str(path)], check=True, capture_output=True, text=True).stdout


def needed(path: Path) -> list[str]:
    """The DT_NEEDED entries of ``path``."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(path, "-d"))


def _dynamic_symbols(path: Path, which: str) -> list[str]:
    """The dynamic symbols ``nm -D`` lists for ``path`` with ``which`` (``--defined-only``, ``--undefined-only``),
    as it names them (a version kept: ``name@VER``)."""
    out = subprocess.run(["nm", "-D", which, str(path)], check=True, capture_output=True, text=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def exports(path: Path) -> list[str]:
    """The defined dynamic symbols of ``path`` as ``nm`` names them, a version kept (``name@VER``)."""
    return _dynamic_symbols(path, "--defined-only")


def imports(path: Path) -> list[str]:
    """The undefined dynamic symbols of ``path``, without their version (``dlsym@GLIBC_2.34`` is ``dlsym``)."""
    return [name.split("@")[0] for name in _dynamic_symbols(path, "--undefined-only")]
