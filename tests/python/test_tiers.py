"""How the suite orders its tiers: GPU tests last, so that a time-boxed GPU run gets through the quick tiers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_tests_are_collected_after_the_others() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "gpu or realcudnn",
         "tests/gpu", "tests/realcudnn"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    gpu = [i for i, name in enumerate(ids) if name.startswith("tests/gpu/")]
    assert gpu and len(gpu) < len(ids), ids  # both tiers collected, though tests/gpu comes first by name
    assert gpu == list(range(len(ids) - len(gpu), len(ids))), ids
