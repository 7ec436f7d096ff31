"""ucudnn: micro-batched cuDNN convolutions under a GPU-memory budget.

The preload library (``libucudnn.so``) intercepts the legacy cuDNN convolution API of unmodified programs and
runs each convolution as micro-batches, each with the fastest algorithm whose workspace fits. This package holds
the planner, the SQLite cache, the workspace-policy API, the host backend (a CPU ``libcudnn.so.9``) and the CLIs.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
