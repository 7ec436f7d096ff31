"""Scratch borrowed from the framework's allocator for planner benchmarks (UCUDNN_SCRATCH_FROM_FRAMEWORK), on the
host backend in a Python host whose stand-in torch has a caching allocator (``scratch_probe.py``), on both paths: the
graph path's benchmarks, and the legacy path's searches at a Get*_v7 query (cudnnFind on buffers of cuDNN's own,
made again with Find*Ex on scratch where they went short). UCUDNN_HOST_FIND_MEMORY=3 MiB stands in for a device the
framework holds: the tensors at N = 16 take 6.4 MB, and the fast algorithm's workspace does not fit beside those at
2 samples."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._env import run_json_probe, run_probe

FULL = {"UCUDNN_HOST_FIND_MEMORY": str(3 << 20)}


def _probe(tmp_path: Path, api: str, name: str, extra: dict[str, str], *args: str) -> dict[str, Any]:
    env = {"UCUDNN_DATABASE": str(tmp_path / f"{name}.sqlite"), "UCUDNN_HOST_TIMING": "model", **extra}
    got = run_json_probe("tests.bench.scratch_probe", "--api", api, *args, env=env, timeout=300)[-1]
    assert got["rel_err"] <= 1e-5, got
    return got


def _parts(got: dict[str, Any]) -> Any:
    """The plan's micro-batches: the graph path's parts, the legacy plan's (size, algorithm) list."""
    plan = got["plan"]
    return plan["parts"] if "parts" in plan else [(m["batch"], m["algo"]) for m in plan["micro_batches"]]


@pytest.mark.parametrize("api", ["graph", "legacy"])
def test_benchmarks_borrow_scratch_from_the_framework_and_plan_as_with_room(tmp_path: Path, api: str) -> None:
    roomy = _probe(tmp_path, api, "roomy", {})
    short = _probe(tmp_path, api, "short", FULL)
    borrowed = _probe(tmp_path, api, "borrowed", FULL | {"UCUDNN_SCRATCH_FROM_FRAMEWORK": "1"})
    assert roomy["stats"]["benchmarks_short_of_memory"] == 0 and roomy["allocator"]["allocs"] == 0, roomy
    assert roomy["stats"]["scratch_searches"] == 0, roomy
    # The device alone: sizes measured short, and a plan without the fast algorithm's larger parts (16 x 1 sample
    # for 8 x 2 with room).
    assert short["stats"]["benchmarks_short_of_memory"] > 0 and short["allocator"]["allocs"] == 0, short
    assert short["stats"]["scratch_searches"] == 0, short
    assert _parts(short) != _parts(roomy), (short, roomy)
    # Borrowing: nothing short, the plan made with room, every buffer given back.
    assert borrowed["stats"]["benchmarks_short_of_memory"] == 0, borrowed
    assert borrowed["stats"]["framework_scratch_allocs"] == borrowed["allocator"]["allocs"] > 0, borrowed
    assert borrowed["allocator"]["frees"] == borrowed["allocator"]["allocs"] and borrowed["allocator"]["live"] == 0
    # No buffer over the limit: a tensor at N = 16 (3.2 MB), or a workspace within the limit.
    assert max(borrowed["allocator"]["sizes"]) <= 4 << 20, borrowed
    assert _parts(borrowed) == _parts(roomy) and borrowed["workspace_bytes"] == roomy["workspace_bytes"]
    # The graph path benchmarks on scratch anyway; the legacy path's searches ran again on it.
    assert (borrowed["stats"]["scratch_searches"] > 0) == (api == "legacy"), borrowed
    searched = [got["stats"]["legacy_benchmarks"] for got in (roomy, short, borrowed)]
    if api == "legacy":
        # With room or borrowing each size is searched once (the list's plans at several limits reuse what was
        # measured); short, a size whose tensors found no memory is searched again at each of them.
        assert searched[0] > 0 and searched[2] == searched[0] and searched[1] > searched[0], (roomy, short, borrowed)
    else:
        assert searched == [0, 0, 0], (roomy, short, borrowed)


@pytest.mark.parametrize("api", ["graph", "legacy"])
def test_a_size_the_framework_refused_is_not_asked_for_again(tmp_path: Path, api: str) -> None:
    # The stand-in lends at most 2 MiB, so the tensors at N = 16 (3.2 MB) are refused. PyTorch's allocator empties
    # its cache before it refuses; that size and larger ones are not asked for again in the process: one refusal,
    # where the searches at the list's several limits (legacy) and the engines benchmarked at N = 16 (graph) asked
    # again each time before (9 and 4 refusals).
    borrow = FULL | {"UCUDNN_SCRATCH_FROM_FRAMEWORK": "1"}
    got = _probe(tmp_path, api, "refused", borrow, "--lend-max", str(2 << 20))
    assert got["allocator"]["refused"] == got["stats"]["framework_scratch_refused"] == 1, got
    assert got["allocator"]["allocs"] == got["stats"]["framework_scratch_allocs"] > 0, got  # smaller ones still lent
    assert got["allocator"]["frees"] == got["allocator"]["allocs"] and got["allocator"]["live"] == 0, got


def test_the_exit_summary_counts_short_benchmarks_and_names_the_setting(tmp_path: Path) -> None:
    """Where benchmarks went short, the exit summary says so and names the setting that borrows; with it on, nothing
    is short and the part is gone."""
    lines = {}
    for name, extra in (("short", FULL), ("borrowed", FULL | {"UCUDNN_SCRATCH_FROM_FRAMEWORK": "1"})):
        env = {"UCUDNN_HOST_TIMING": "model", "UCUDNN_DATABASE": str(tmp_path / f"{name}.sqlite"), **extra}
        proc = run_probe("tests.bench.scratch_probe", "--api", "legacy", "--summary", env=env, timeout=300)
        lines[name] = next(line for line in proc.stderr.splitlines() if " kernel(s), " in line)
    assert re.search(
        r"; \d+ planner benchmark\(s\) short of device memory \(their plans may lack faster algorithms; "
        r"in a PyTorch program UCUDNN_SCRATCH_FROM_FRAMEWORK=1 borrows it from PyTorch's cache\)",
        lines["short"],
    ), lines
    assert "short of device memory" not in lines["borrowed"], lines


def test_a_second_legacy_run_plans_from_the_cache_without_searching(tmp_path: Path) -> None:
    first = _probe(tmp_path, "legacy", "cache", {})
    again = _probe(tmp_path, "legacy", "cache", {})
    assert first["stats"]["legacy_benchmarks"] > 0 and again["stats"]["legacy_benchmarks"] == 0, (first, again)
    assert _parts(again) == _parts(first) and again["stats"]["planned"] == first["stats"]["planned"] == 1


def test_no_scratch_is_borrowed_where_torch_has_no_cuda_state(monkeypatch: Any) -> None:
    import types

    from ucudnn import _runtime

    asked: list[int] = []

    def alloc(nbytes: int) -> int:
        asked.append(nbytes)
        return 1

    cuda = types.SimpleNamespace(is_initialized=lambda: False, caching_allocator_alloc=alloc)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert _runtime.framework_alloc(1 << 20) == 0 and not asked  # asking would create torch's CUDA state
    monkeypatch.delitem(sys.modules, "torch")
    assert _runtime.framework_alloc(1 << 20) == 0
    cuda.is_initialized = lambda: True
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert _runtime.framework_alloc(1 << 20) == 1 and asked == [1 << 20]
