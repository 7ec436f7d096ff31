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


def _record_given_back(record: Path, events_held: int = 0) -> dict[str, Any]:
    """A driver's record (the stand-in's or the audit's), after checking that the preload library gave back every
    allocation and every event but at most ``events_held``, read no event before it completed, and freed or used
    nothing that was not its own."""
    seen: dict[str, Any] = json.loads(record.read_text())
    assert 0 <= seen["events_created"] - seen["events_destroyed"] <= events_held, seen
    assert seen["allocs"] == seen["frees"] and seen["held"] == 0, seen
    assert seen["bad_frees"] == 0 and seen["bad_events"] == 0 and seen["elapsed_early"] == 0, seen
    return seen


def given_back(record: Path) -> dict[str, Any]:
    """The stand-in's record, after checking that the preload library gave back every event and allocation, read no
    event before it completed, and misused nothing."""
    return _record_given_back(record)


# ---- the audit: the preload library's driver calls, on the stand-in or on the real driver ----

AUDITED = "libucudnn-audited-driver.so"


def build_audit(driver: Path, out: Path) -> Path:
    """Compile tests/preload/c/driver_audit.c into ``out``/libcuda.so.1, in front of ``driver`` (the stand-in, or
    the real libcuda.so.1 on a GPU): linked against a library named AUDITED, which is then replaced by a link to
    ``driver``, so that a lookup in the audit's handle of a name it does not define finds the driver's."""
    from tests.preload.conftest import C_DIR, compile_c

    out.mkdir(parents=True, exist_ok=True)
    stub_source = out / "audited.c"
    stub_source.write_text("int ucudnn_audited_driver_placeholder;\n")
    stub = compile_c(stub_source, output=out / AUDITED, link_cudnn=False,
                     extra=("-shared", "-fPIC", f"-Wl,-soname,{AUDITED}"))  # fmt: skip
    audit = compile_c(C_DIR / "driver_audit.c", output=out / "libcuda.so.1", link_cudnn=False,
                      extra=("-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-Wl,--no-as-needed", str(stub),
                             "-Wl,-rpath,$ORIGIN"))  # fmt: skip
    stub.unlink()
    stub.symlink_to(driver.resolve())
    return audit


def audited(record: Path, failures: dict[str, int] | None = None, events_held: int = 0) -> dict[str, Any]:
    """The audit's record, after checking what the preload library did to the driver: no call failed (but
    ``failures``, {"function:status": calls}, where a test makes the driver fail), every event and allocation given
    back (but at most ``events_held`` events, those of checks still running at exit, which keep theirs), nothing
    freed or used that was not its own, no event read before it was known complete, none recorded on a stream being
    captured."""
    seen = _record_given_back(record, events_held)
    if failures is None:
        assert seen["failures"] == {}, seen
    else:
        assert set(seen["failures"]) == set(failures) and all(seen["failures"][k] >= failures[k] for k in failures)
    assert seen["records_in_capture"] == 0, seen
    return seen
