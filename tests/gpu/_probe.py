"""Whether a GPU test's Python stack is usable, asked of a fresh interpreter (importing CUDA stacks here would
initialise them in the test process)."""

from __future__ import annotations

import functools
import subprocess
import sys


@functools.cache  # one probe per stack and session: each starts an interpreter that imports a CUDA stack (seconds)
def probe_reason(code: str, missing: str) -> str | None:
    """None if ``code`` exits 0 in a fresh interpreter; else ``missing`` (or why python could not run)."""
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run python: {exc}"
    return None if proc.returncode == 0 else missing
