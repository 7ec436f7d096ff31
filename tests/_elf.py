"""What the dynamic linker will read from a built program or library: the libraries it needs and the names it
imports (binutils' readelf and nm, which every compiler the tests use brings along)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


def needed(path: Path) -> list[str]:
    """The DT_NEEDED entries of ``path``."""
    out = subprocess.run(["readelf", "-d", str(path)], check=True, capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def imports(path: Path) -> list[str]:
    """The undefined dynamic symbols of ``path``, without their version (``dlsym@GLIBC_2.34`` is ``dlsym``)."""
    out = subprocess.run(["nm", "-D", "--undefined-only", str(path)], check=True, capture_output=True, text=True)
    return [line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()]
