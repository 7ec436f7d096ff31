"""Scratch borrowed from the framework's allocator for the graph path's planner benchmarks
(UCUDNN_SCRATCH_FROM_FRAMEWORK), on the host backend in a Python host whose stand-in torch has a caching allocator
(``graph_scratch_probe.py``). UCUDNN_HOST_FIND_MEMORY=3 MiB stands in for a device the framework holds: the
tensors at N = 16 take 6.4 MB, and the fast engine's workspace does not fit beside those at 2 samples."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests._env import run_json_probe

FULL = {"UCUDNN_HOST_FIND_MEMORY": str(3 << 20)}


def _probe(tmp_path: Path, name: str, extra: dict[str, str]) -> dict[str, Any]:
    env = {"UCUDNN_DATABASE": str(tmp_path / f"{name}.sqlite"), "UCUDNN_HOST_TIMING": "model", **extra}
    got = run_json_probe("tests.bench.graph_scratch_probe", env=env, timeout=300)[-1]
    assert got["rel_err"] <= 1e-5, got
    return got


def test_benchmarks_borrow_scratch_from_the_framework_and_plan_as_with_room(tmp_path: Path) -> None:
    roomy = _probe(tmp_path, "roomy", {})
    short = _probe(tmp_path, "short", FULL)
    borrowed = _probe(tmp_path, "borrowed", FULL | {"UCUDNN_SCRATCH_FROM_FRAMEWORK": "1"})
    assert roomy["stats"]["benchmarks_short_of_memory"] == 0 and roomy["allocator"]["allocs"] == 0, roomy
    # The device alone: sizes measured short, and a plan without the fast engine's larger parts (16 x 1 sample for
    # 8 x 2 with room).
    assert short["stats"]["benchmarks_short_of_memory"] > 0 and short["allocator"]["allocs"] == 0, short
    assert short["plan"]["parts"] != roomy["plan"]["parts"], (short, roomy)
    # Borrowing: nothing short, the plan made with room, every buffer given back.
    assert borrowed["stats"]["benchmarks_short_of_memory"] == 0, borrowed
    assert borrowed["stats"]["framework_scratch_allocs"] == borrowed["allocator"]["allocs"] > 0, borrowed
    assert borrowed["allocator"]["frees"] == borrowed["allocator"]["allocs"] and borrowed["allocator"]["live"] == 0
    assert (
        borrowed["plan"]["parts"] == roomy["plan"]["parts"] and borrowed["workspace_bytes"] == roomy["workspace_bytes"]
    )


def test_no_scratch_is_borrowed_where_torch_has_no_cuda_state(monkeypatch: Any) -> None:
    import types

    from ucudnn import _runtime

    asked: list[int] = []
    cuda = types.SimpleNamespace(is_initialized=lambda: False, caching_allocator_alloc=lambda n: asked.append(n) or 1)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert _runtime.framework_alloc(1 << 20) == 0 and not asked  # asking would create torch's CUDA state
    monkeypatch.delitem(sys.modules, "torch")
    assert _runtime.framework_alloc(1 << 20) == 0
    cuda.is_initialized = lambda: True
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert _runtime.framework_alloc(1 << 20) == 1 and asked == [1 << 20]
