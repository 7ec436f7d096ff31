"""Run by test_pytorch.py in the interpreter of a CUDA build of PyTorch on a machine without a GPU, alone and
under `ucudnn run`. It imports torch (which loads libtorch_cuda.so and NVIDIA's libcudnn.so.9 from the
nvidia-cudnn wheel, privately), trains one CPU step of a small convolution, then builds a convolution's graph-API
descriptors through the cuDNN functions PyTorch's libtorch_cuda.so is bound to: the process's global scope, which
under `ucudnn run` holds the hooks, and alone holds no cuDNN at all (then the library torch loaded is used directly).
Under `ucudnn run` it builds them a second time through dlsym on torch's library handle, as frameworks that dlopen
cuDNN do. Prints one JSON line. It imports nothing of ucudnn. Usage: python -m tests.frameworks.torch_probe"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from typing import Any

import torch

from tests.realcudnn._sequence import build


def mapped_libcudnn() -> list[str]:
    """Every libcudnn.so.9 mapped into this process."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if line.rstrip().endswith("/libcudnn.so.9")}
    return sorted(paths)


def train_step() -> str:
    """One forward and backward of a convolution on the CPU; a digest of the output and the gradients."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    x = torch.randn(4, 3, 16, 16, requires_grad=True)
    y = conv(x)
    y.square().sum().backward()
    assert x.grad is not None and conv.weight.grad is not None
    values = [t.detach().flatten().tolist() for t in (y, x.grad, conv.weight.grad)]
    return hashlib.sha256(repr(values).encode()).hexdigest()


def sequence(lib: Any) -> dict[str, Any]:
    statuses, made = build(lib)
    destroyed = [lib.cudnnBackendDestroyDescriptor(d) for d in made]
    return {"statuses": statuses, "created": len(made), "destroyed": destroyed}


libraries = mapped_libcudnn()
digest = train_step()
result: dict[str, Any] = {
    "torch": torch.__version__,
    "torch_cuda": torch.version.cuda,
    "cuda_available": torch.cuda.is_available(),
    "cudnn_version": torch.backends.cudnn.version(),
    "train_digest": digest,
    "libcudnn": libraries,
    "torch_lib": os.path.join(os.path.dirname(torch.__file__), "lib"),
    "preloaded": "libucudnn.so" in os.environ.get("LD_PRELOAD", ""),
}
torch_cudnn = ctypes.CDLL(libraries[0], mode=os.RTLD_NOLOAD | os.RTLD_LAZY) if len(libraries) == 1 else None
scope = ctypes.CDLL(None)
if hasattr(scope, "cudnnBackendCreateDescriptor"):
    result["scope"] = sequence(scope)
    if torch_cudnn is not None:
        result["handle"] = sequence(torch_cudnn)
elif torch_cudnn is not None:
    result["direct"] = sequence(torch_cudnn)
result["libcudnn_after"] = mapped_libcudnn()
print(json.dumps(result))
