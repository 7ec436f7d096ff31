"""How the suite orders its tiers: GPU tests last, so that a time-boxed GPU run gets through the quick tiers."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._env import ROOT


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


def test_gpu_tests_name_the_stack_they_lack(tmp_path: Path) -> None:
    """With a driver answering (a stand-in nvidia-smi) but no CUDA stack in Python, no GPU test fails: each skips
    and says what it lacks."""
    for stack in ("cupy", "torch", "jax"):
        if importlib.util.find_spec(stack) is not None:
            pytest.skip(f"{stack} is installed here: the GPU tests would try it")
    if shutil.which("nvidia-smi") is not None:
        pytest.skip("an NVIDIA driver is here: the GPU tests run for real")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: stand-in'\n")
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "gpu", "tests/gpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    skips = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert "passed" not in proc.stdout and "failed" not in proc.stdout, proc.stdout
    assert any("CuPy" in line and "test_gpu_e2e" in line for line in skips), skips
    assert any("torch with CUDA" in line for line in skips), skips
    assert any("JAX with its CUDA plugin" in line for line in skips), skips
    assert not any("no nvidia-smi" in line for line in skips), skips


def test_each_gpu_test_reports_its_time_as_it_ends(tmp_path: Path) -> None:
    """A GPU test that ran prints its outcome, duration and time into the session at once (a time-boxed run that is
    stopped prints no durations table); tests without the marker print nothing of the kind."""
    if shutil.which("nvidia-smi") is None:  # a stand-in driver, so that the marked test runs instead of skipping
        smi = tmp_path / "bin" / "nvidia-smi"
        smi.parent.mkdir()
        smi.write_text("#!/bin/sh\necho 'GPU 0: stand-in'\n")
        smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    tests = tmp_path / "test_marked.py"
    tests.write_text(
        "import pytest, time\n"
        "@pytest.mark.gpu\ndef test_on_the_gpu():\n    time.sleep(0.2)\n"
        "@pytest.mark.gpu\ndef test_failing_on_the_gpu():\n    assert False\n"
        "def test_elsewhere():\n    pass\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest", "-c",
         str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(tests)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("gpu test ")]
    assert len(lines) == 2, proc.stdout + proc.stderr
    timed = re.fullmatch(r"gpu test \S+::test_on_the_gpu: passed in (\d+\.\d) s, \d+ s in", lines[0])
    assert timed and float(timed[1]) >= 0.2, lines
    assert "::test_failing_on_the_gpu: failed in " in lines[1], lines
