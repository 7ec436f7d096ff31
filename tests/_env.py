"""The checkout's root, for every test that needs it, and the environment of a child Python that must import this
checkout."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def project_pythonpath(env: Mapping[str, str]) -> str:
    """PYTHONPATH for a child process: this checkout first, then the entries ``env`` already has. Replacing them
    would lose dependencies installed outside site-packages (``pip install --target DIR`` and PYTHONPATH=DIR, as on
    the GPU machines, where cffi lives only there)."""
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(ROOT), *kept])
