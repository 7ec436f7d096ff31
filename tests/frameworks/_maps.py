"""What the framework probes read of their own process (they import nothing of ucudnn)."""

from __future__ import annotations


def mapped_libcudnn() -> list[str]:
    """Every libcudnn.so* mapped into this process."""
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "/libcudnn.so" in line})
