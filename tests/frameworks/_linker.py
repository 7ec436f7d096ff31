"""What the framework tests share: the interpreter of an environment with a CUDA build of a framework, and a probe
run in it alone or under `ucudnn run` with the dynamic linker's log of every binding (LD_BIND_NOW=1: all of them at
load time), read back as which library each cuDNN name of the framework's own libraries went to."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests._env import ROOT, real_client_missing

BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `(cudnn\w+)'(?: \[([^\]]+)\])?")
# (the library whose reference it is, the name) -> (the library it was bound to, the symbol version asked for)
Bindings = dict[tuple[str, str], tuple[str, str]]


def framework_python(var: str, check: str, install: str) -> str:
    """The interpreter ``var`` names, where ``check`` (Python printing something true of a CUDA build) holds."""
    exe = os.environ.get(var)
    if not exe:
        real_client_missing(f"set {var} to the python of an environment with it ({install})")
    proc = subprocess.run([exe, "-c", check], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or proc.stdout.strip() in ("", "None", "False"):
        real_client_missing(f"{var}={exe}: `{check}` does not hold ({install}): {proc.stderr[-300:]}")
    return exe


@dataclass(frozen=True)
class Run:
    result: dict[str, Any]  # the probe's one JSON line
    bindings: Bindings
    stats: dict[str, Any] | None  # the stats file, under `ucudnn run`
    stderr: str


def run_probe(python: str, probe: str, folder: Path, *, under: bool, binder: Callable[[Path], bool] | None = None,
              env: dict[str, str] | None = None, args: tuple[str, ...] = (),
              ucudnn_args: tuple[str, ...] = ()) -> Run:  # fmt: skip
    """``python -m probe ARGS`` from the checkout, alone or under `ucudnn run --stats-file ... UCUDNN_ARGS`, with
    the bindings made by the libraries ``binder`` accepts (none read without one). It must exit 0 and print one JSON
    line."""
    folder.mkdir()
    child = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}
    if binder is not None:
        child |= {"LD_BIND_NOW": "1", "LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": str(folder / "ld")}
    child |= env or {}
    cmd = [python, "-m", probe, *args]
    stats = folder / "stats.json"
    if under:
        cmd = [sys.executable, "-m", "ucudnn.cli", "run", "--stats-file", str(stats), *ucudnn_args, "--", *cmd]
    proc = subprocess.run(cmd, cwd=ROOT, env=child, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, proc.stdout
    bindings: Bindings = {}
    for log in folder.glob("ld.*"):  # written only with a binder (LD_DEBUG_OUTPUT)
        with log.open(errors="replace") as f:
            for line in f:
                m = BINDING.search(line)
                if not m:
                    continue
                source, target = Path(os.path.normpath(m[1])), os.path.normpath(m[2])  # RPATH's $ORIGIN/../..
                if binder is not None and binder(source):
                    bindings[source.name, m[3]] = (target, m[4] or "")
    return Run(json.loads(lines[0]), bindings, json.loads(stats.read_text()) if under else None, proc.stderr)
