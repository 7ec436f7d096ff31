"""A small convolutional network trained the way a framework drives cuDNN -- the program to try ``ucudnn run`` on.

    python -m ucudnn.examples.train                  # cuDNN alone
    ucudnn run -- python -m ucudnn.examples.train    # the same program under ucudnn

On a machine without a GPU it convolves through the host backend (``ucudnn/_lib/libcudnn.so.9``, the CPU stand-in
for cuDNN that ships with the package) using cuDNN's legacy API exactly as PyTorch's legacy path does: for every
convolution it asks ``cudnnGet*Algorithm_v7`` for the ranked algorithms, takes the first whose workspace fits
the memory it has left for workspaces (``--memory``), allocates that workspace and runs the convolution with it.
Forward, backward-data and backward-filter all run, and the weights take an SGD step. Where PyTorch with a CUDA
GPU is installed, ``--backend torch`` (the default there) trains the same network with PyTorch instead, on
its default cuDNN path.

Each step prints its time and loss; both runs compute the same losses (up to rounding). Under ``ucudnn run``
the preload library intercepts the calls, lists micro-batched plans that fit the same memory, and prints one
summary line at exit saying what it did. ``UCUDNN_HOST_DEVICE_MEMORY`` is set to ``--memory`` if unset, so that
ucudnn's list is bounded by the same free memory the program uses.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ucudnn import config

Array = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Layer:
    cin: int
    cout: int
    kernel: int
    pad: int


# Caffe's CIFAR-10 "quick" convolutions (without pooling): the fast host algorithms (GEMM-based) need a
# workspace that grows with the batch.
LAYERS: tuple[Layer, ...] = (Layer(3, 32, 5, 2), Layer(32, 32, 5, 2), Layer(32, 64, 5, 2))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ucudnn.examples.train",
        description="Train a small CNN on synthetic data, choosing cuDNN algorithms as PyTorch's legacy path does.",
    )
    p.add_argument("--backend", choices=("auto", "host", "torch"), default="auto",
                   help="host: the CPU host backend; torch: PyTorch on a CUDA GPU; auto: torch where a CUDA GPU "
                        "and PyTorch are present, else host")  # fmt: skip
    p.add_argument("--steps", type=int, default=4, help="training steps (default 4)")
    p.add_argument("--batch", type=int, default=32, help="mini-batch size N (default 32)")
    p.add_argument("--size", type=int, default=16, help="image height and width (default 16)")
    p.add_argument("--memory", default="1MiB",
                   help="memory left for workspaces: the first algorithm whose workspace fits is used "
                        "(host backend; default 1MiB)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in ("steps", "batch", "size"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    try:
        args.memory_bytes = config.parse_size(args.memory, name="--memory")
    except config.ConfigError as exc:
        p.error(str(exc))
    return args


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class HostNet:
    """The network on the host backend, every convolution through the cuDNN API (and the preload library's hooks
    when it is loaded)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from ucudnn import cudnn as C

        self.C = C
        self.lib = C.load()
        self.handle = self.lib.handle()
        self.memory = int(args.memory_bytes)
        rng = np.random.default_rng(args.seed)
        # He initialisation: the losses stay of order 1 over the steps.
        self.weights = [
            (rng.standard_normal((lay.cout, lay.cin, lay.kernel, lay.kernel)) * (2 / (lay.cin * lay.kernel**2)) ** 0.5)
            .astype(np.float32)
            for lay in LAYERS
        ]  # fmt: skip
        self.convs = [C.ConvSpec(pads=(lay.pad, lay.pad), strides=(1, 1), dilations=(1, 1)) for lay in LAYERS]
        self.x = rng.standard_normal((args.batch, LAYERS[0].cin, args.size, args.size)).astype(np.float32)
        shape: tuple[int, ...] = self.x.shape
        for w, conv in zip(self.weights, self.convs, strict=True):
            shape = self._out_shape(shape, w, conv)
        self.target = rng.standard_normal(shape).astype(np.float32)
        self.chosen: dict[tuple[Any, ...], tuple[int, int]] = {}

    def _out_shape(self, x_shape: tuple[int, ...], w: Array, conv: Any) -> tuple[int, ...]:
        return tuple(self.C.conv_output_shape(x_shape, w.shape, conv.pads, conv.strides, conv.dilations))

    def _algo(self, op: Any, x: Array, w: Array, y: Array, conv: Any) -> tuple[int, npt.NDArray[np.uint8]]:
        """PyTorch's legacy choice: the ranked list, the first entry whose workspace can be allocated."""
        key = (int(op), x.shape, w.shape)
        if key not in self.chosen:
            rows = self.lib.get_v7(self.handle, op, x, w, y, conv)
            fits = [r for r in rows if r.status == 0 and r.memory_bytes <= self.memory]
            if not fits:
                raise SystemExit(f"no algorithm fits --memory {self.memory} bytes for a {x.shape} convolution")
            self.chosen[key] = (int(fits[0].algo), int(fits[0].memory_bytes))
        algo, need = self.chosen[key]
        return algo, np.empty(need, np.uint8)

    def step(self, lr: float) -> float:
        C = self.C
        acts = [self.x]
        for w, conv in zip(self.weights, self.convs, strict=True):
            x = acts[-1]
            y = np.zeros(self._out_shape(x.shape, w, conv), np.float32)
            algo, ws = self._algo(C.Op.FWD, x, w, y, conv)
            self.lib.forward(self.handle, x, w, conv, algo, ws, y=y)
            acts.append(np.maximum(y, 0.0))
        diff = acts[-1] - self.target
        loss = float(np.mean(diff * diff))
        dy = (2.0 / diff.size) * diff * (acts[-1] > 0)
        for i in reversed(range(len(self.weights))):
            x, w, conv = acts[i], self.weights[i], self.convs[i]
            dw = np.zeros_like(w)
            algo, ws = self._algo(C.Op.BWD_FILTER, x, w, dy, conv)
            self.lib.backward_filter(self.handle, x, dy, conv, algo, dw, ws)
            if i:
                dx = np.zeros_like(x)
                algo, ws = self._algo(C.Op.BWD_DATA, x, w, dy, conv)
                self.lib.backward_data(self.handle, w, dy, conv, algo, dx, ws)
                dy = dx * (x > 0)
            w -= lr * dw
        return loss

    def describe(self) -> str:
        via = "through ucudnn's preload library" if self.lib.hooks is not None else "cuDNN alone"
        return f"host backend, {via}, workspaces within {config.format_size(self.memory)}"


class TorchNet:
    """The same network in PyTorch on a CUDA GPU (its default cuDNN path)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.torch = torch
        torch.manual_seed(args.seed)
        torch.backends.cudnn.benchmark = False
        layers: list[Any] = []
        for lay in LAYERS:
            layers += [torch.nn.Conv2d(lay.cin, lay.cout, lay.kernel, padding=lay.pad, bias=False), torch.nn.ReLU()]
        self.net = torch.nn.Sequential(*layers).cuda()
        self.x = torch.randn(args.batch, LAYERS[0].cin, args.size, args.size, device="cuda")
        with torch.no_grad():
            self.target = torch.randn_like(self.net(self.x))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, lr: float) -> float:
        del lr
        self.opt.zero_grad()
        loss = self.torch.nn.functional.mse_loss(self.net(self.x), self.target)
        loss.backward()
        self.opt.step()
        self.torch.cuda.synchronize()
        return float(loss.item())

    def describe(self) -> str:
        return f"PyTorch {self.torch.__version__} on {self.torch.cuda.get_device_name()}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    backend = args.backend
    if backend == "auto":
        backend = "torch" if _torch_cuda() else "host"
    if backend == "host" and not os.environ.get("UCUDNN_HOST_DEVICE_MEMORY", "").strip():
        # Read by the preload library on its first call: its list is bounded by the same free memory.
        os.environ["UCUDNN_HOST_DEVICE_MEMORY"] = str(args.memory_bytes)
    net: HostNet | TorchNet = HostNet(args) if backend == "host" else TorchNet(args)
    layers = ", ".join(f"{lay.cin}->{lay.cout} {lay.kernel}x{lay.kernel}" for lay in LAYERS)
    print(f"training {len(LAYERS)} convolutions ({layers}) at N={args.batch}, {args.size}x{args.size}; "
          f"{net.describe()}")  # fmt: skip
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        loss = net.step(0.05)
        times.append(time.perf_counter() - t0)
        print(f"step {step + 1}: loss {loss:.6f}  {times[-1] * 1e3:8.1f} ms")
    if len(times) > 1:
        print(f"median step after the first: {float(np.median(times[1:])) * 1e3:.1f} ms (the first includes "
              "ucudnn's planning, when it runs: benchmarks it keeps in its cache for the next run)")  # fmt: skip
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
