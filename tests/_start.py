"""Start Python hosts together, as data-parallel ranks start: each host registers ucudnn's planner, says it is
ready and waits for a go file, which the test creates once every host is ready. Both sides of that handshake
live here (hosts import it with the checkout on PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def ready_then_wait(go: str | os.PathLike[str], timeout_s: float = 60) -> None:
    """In a host under the preload library: register the planner (so no rank starts late importing it), write
    GO.ready.PID, then return once GO exists (at most ``timeout_s`` later)."""
    from ucudnn import _runtime

    assert _runtime.registered(), "the shim should be loaded (LD_PRELOAD)"
    Path(f"{os.fspath(go)}.ready.{os.getpid()}").touch()
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.001)


def start_together(go: Path, hosts: int, timeout_s: float = 120) -> None:
    """In the test: create ``go`` once ``hosts`` hosts have called ready_then_wait(go) (or ``timeout_s`` passed)."""
    deadline = time.monotonic() + timeout_s
    while len(list(go.parent.glob(f"{go.name}.ready.*"))) < hosts and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
