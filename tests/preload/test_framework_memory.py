"""What the framework can allocate (uc_memory.c), in a Python host: the device's free memory (here its host-backend
stand-in, UCUDNN_HOST_DEVICE_MEMORY) plus what PyTorch's caching allocator holds unused (reserved - allocated),
read through the framework source ucudnn's runtime registers -- and only once torch's CUDA state exists. The
legacy path's Get*_v7 listing is bounded by that figure (the same function the graph path's offers use)."""

from __future__ import annotations

from pathlib import Path

from .conftest import base_env, run_probe

MiB = 1 << 20


def test_torch_allocator_cache_counts_as_allocatable(preload_lib: Path, host_lib: Path, tmp_path: Path) -> None:
    env = base_env() | {
        "LD_PRELOAD": str(preload_lib),
        "UCUDNN_HOST_DEVICE_MEMORY": str(MiB),
        "UCUDNN_HOST_TIMING": "model",
        "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite"),
    }
    reserved, allocated = 6 * MiB, 2 * MiB
    report = run_probe("framework_probe.py", str(host_lib), str(reserved), str(allocated), env=env, timeout=300)
    # No torch, or torch without CUDA state (asking would create it): the device's free memory alone.
    assert report["no_torch"] == MiB and report["cuda_not_initialized"] == MiB, report
    # torch with CUDA: its allocator's reserved-but-unused bytes are allocatable too.
    assert report["initialized"] == MiB + reserved - allocated, report
    # Get*_v7 lists plans bounded by that figure: a plan needing more than the free memory is listed first only
    # once the allocator's cache counts.
    assert 0 < report["entry_without_cache"] <= MiB < report["entry_with_cache"] <= MiB + reserved - allocated, report
