"""The overhead benchmarks' small C programs, compiled with the system C compiler (an installed wheel has no
headers: each program declares what it uses)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def compile_program(tool: str, source: str, directory: Path, *flags: str) -> Path:
    """``source`` compiled at -O2 into ``directory``/program, ``flags`` (libraries, rpath) after it; exits naming
    ``tool`` when there is no C compiler (``$CC``, else ``cc``)."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise SystemExit(f"{tool}: no C compiler ({cc})")
    src, exe = directory / "program.c", directory / "program"
    src.write_text(source, encoding="utf-8")
    subprocess.run([cc, "-O2", "-o", str(exe), str(src), *flags], check=True)
    return exe
