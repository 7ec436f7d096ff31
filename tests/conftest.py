"""Suite-wide test configuration: GPU tests run only where a GPU and CuPy are present."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import _sanitizer

# What to install for the tests of the real cuDNN (no GPU needed): the wheel without its declared dependencies
# (the CUDA libraries it lists add about a gigabyte, and the front library needs only libc/libdl). `.ci/run` does this.
REAL_CUDNN_INSTALL = "pip install --no-deps nvidia-cudnn-cu13"
# What the GPU tests need: an NVIDIA GPU and its driver, then each its own stack (CuPy for ucudnn-bench's CUDA
# backend, CUDA torch and torchvision, JAX's CUDA plugin), which its skip names.
GPU_INSTALL = "an NVIDIA GPU and its driver"
CUPY_INSTALL = "pip install 'ucudnn[cuda]' (CuPy)"


def assert_native_output_diverted(code: str, noise: str) -> None:
    """Run ``code`` in a fresh interpreter: it prints 'before' and 'after' to stdout and ``noise`` from native code
    inside ``native_stdout_to_stderr()``, which must land on stderr only."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["before", "after"]
    assert noise in proc.stderr


@functools.cache
def driver_unavailable_reason() -> str | None:
    """None if an NVIDIA driver answers (nvidia-smi), else why not."""
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi on PATH (no NVIDIA driver)"
    try:
        subprocess.run(["nvidia-smi", "-L"], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi -L failed: {exc}"
    return None


@functools.cache
def cupy_unavailable_reason() -> str | None:
    """None if CuPy can use a GPU, else why not."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy missing or no usable device
        return f"CuPy cannot use a GPU: {exc}"
    return None


def gpu_unavailable_reason() -> str | None:
    """None if an NVIDIA GPU is usable from Python through CuPy (what ucudnn-bench's CUDA backend needs)."""
    return driver_unavailable_reason() or cupy_unavailable_reason()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests are skipped, with the reason, where no GPU is usable, and run last where one is: each starts
    processes of its own (seconds apiece), so a time-boxed run (the GPU acceptance gives `-m "gpu or realcudnn"`
    three minutes) always gets through the quick tests first; the GPU modules that set RUN_LAST (checks beyond the
    acceptance's) come after the other GPU tests."""
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            reason = reason or driver_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}; needs {GPU_INSTALL}"))
    # stable: each group keeps its order
    items.sort(key=lambda item: ("gpu" in item.keywords, bool(getattr(getattr(item, "module", None), "RUN_LAST", 0))))


class _Session:
    """What the GPU tests' progress lines need: the pytest configuration and when the session began."""

    config: pytest.Config | None = None
    start = 0.0


def pytest_configure(config: pytest.Config) -> None:
    _Session.config, _Session.start = config, time.monotonic()
    try:
        _sanitizer.install(os.environ)
    except RuntimeError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each GPU test that ran says at once how long it took and when it ended: a run stopped by a time box (the
    GPU acceptance gives `-m "gpu or realcudnn"` three minutes) prints no durations table, and `-q` names no test."""
    config = _Session.config
    if report.when != "call" or "gpu" not in report.keywords or config is None:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        elapsed = time.monotonic() - _Session.start
        line = f"gpu test {report.nodeid}: {report.outcome} in {report.duration:.1f} s, {elapsed:.0f} s in"
        reporter.write(f"\n{line}\n")  # a line of its own, also after `-q`'s progress dots


@pytest.fixture(scope="session")
def standin_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in CUDA driver, libcuda.so.1 (tests/_driver.py)."""
    from tests import _driver

    return _driver.build(tmp_path_factory.mktemp("driver"))
