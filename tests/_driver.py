"""The stand-in CUDA driver (tests/preload/c/standin_driver.c): a libcuda.so.1 over host memory that, with
UCUDNN_HOST_DRIVER=1, the preload library treats as the device's, so that its GPU paths run on the host backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ucudnn import _paths


def build(out: Path) -> Path:
    """Compile the stand-in into ``out``/libcuda.so.1, linked against the host backend for its model clock."""
    from tests.preload.conftest import C_DIR, compile_c

    host = (f"-L{_paths.LIB_DIR}", "-l:libcudnn.so.9", f"-Wl,-rpath,{_paths.LIB_DIR}")
    return compile_c(C_DIR / "standin_driver.c", output=out / "libcuda.so.1", link_cudnn=False,
                     extra=("-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", *host))  # fmt: skip


def on_device(driver: Path, record: Path, **standin: str) -> dict[str, str]:
    """The environment of a run on the stand-in device, the driver preloaded before the preload library; standin:
    its STANDIN_* settings by lower-case name (memory, event_lag, capturing)."""
    env = {"LD_PRELOAD": f"{driver} {_paths.PRELOAD}", "UCUDNN_HOST_DRIVER": "1", "STANDIN_RECORD": str(record)}
    return env | {f"STANDIN_{k.upper()}": v for k, v in standin.items()}


def given_back(record: Path) -> dict[str, Any]:
    """The stand-in's record, after checking that the preload library gave back every event and allocation, read no
    event before it completed, and misused nothing."""
    seen: dict[str, Any] = json.loads(record.read_text())
    assert seen["events_created"] == seen["events_destroyed"], seen
    assert seen["allocs"] == seen["frees"] and seen["held"] == 0, seen
    assert seen["bad_frees"] == 0 and seen["bad_events"] == 0 and seen["elapsed_early"] == 0, seen
    return seen
