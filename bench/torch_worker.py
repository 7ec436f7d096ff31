"""One training run of ``torch_train``, in a process of its own (PyTorch alone, or under ``ucudnn run``):

    python -m ucudnn.bench.torch_worker --model resnet18 --batch 256 --out run.json [--headroom-bytes B]

``python -m ucudnn.bench.torch_train`` starts it for every configuration; what the options mean is said there. It
builds the model and a synthetic batch, under memory pressure sizes and allocates the ballast, warms up, lets a
ucudnn run's checks of new plans end (forward and backward steps, the weights unchanged), times the training
iterations with CUDA events, and writes its figures as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_MIB = 1 << 20
CONV3D = "conv3d"
PRECISIONS = ("float32", "bfloat16")  # bfloat16: torch.autocast's mixed precision
CONV3D_CLASSES = 10
# Warm-up steps in a row without a check ending (or starting) after which settling stops: a check takes
# 2 * (UCUDNN_VERIFY_SAMPLES + 1) executions of its kernel, one per step, and is read one step later.
SETTLE_PATIENCE = 12


# ---- the models ----


def conv3d_net(num_classes: int = CONV3D_CLASSES) -> Any:
    """A small video/medical-style 3-D convolution network (a torch.nn.Module): four 3x3x3 convolutions with batch
    norm and ReLU (3 -> 32 -> 64 -> 128 -> 128 channels), pooling space first and time later, as clip
    classifiers do, then global average pooling and a linear classifier. Input: (N, 3, frames, side, side)."""
    from torch import nn

    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout), nn.ReLU(inplace=True)]

    return nn.Sequential(
        *block(3, 32), nn.MaxPool3d((1, 2, 2)),
        *block(32, 64), nn.MaxPool3d(2),
        *block(64, 128),
        *block(128, 128), nn.MaxPool3d(2),
        nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(128, num_classes),
    )  # fmt: skip


def build_model(name: str) -> tuple[Any, int]:
    """The model by name and its class count: ``conv3d``, or a torchvision model with 1000 classes."""
    if name == CONV3D:
        return conv3d_net(), CONV3D_CLASSES
    import torchvision

    return getattr(torchvision.models, name)(weights=None, num_classes=1000), 1000


def input_shape(name: str, batch: int, image: int, frames: int) -> tuple[int, ...]:
    """The synthetic input of a model: clips for ``conv3d``, images otherwise."""
    return (batch, 3, frames, image, image) if name == CONV3D else (batch, 3, image, image)


# ---- memory pressure ----


def weight_bytes(model: Any) -> int:
    """Bytes of the model's weights: as much again for their gradients, and for SGD's momentum."""
    return int(sum(p.numel() * p.element_size() for p in model.parameters()))


def model_needs(torch: Any, model: Any, forward: Callable[[], Any]) -> int:
    """Bytes a training step of ``model`` needs besides convolution workspaces, from one forward pass (``forward``
    returns the loss): the larger of what the forward pass keeps allocated (weights, the activations saved for
    backward: the step's peak is as backward starts) and, where the largest activation is produced, what was
    allocated then plus twice it (late in backward: the activations saved up to there, the gradients of that
    activation and of its input), plus twice the weights (their gradients and momentum). Adding twice the largest
    activation to everything the forward pass keeps would count, at the peak, gradients that exist only late in
    backward: for ResNet's stem (822 MB at N = 256) about 1.6 GB more than the headroom asked for."""
    largest = [0, 0]  # bytes of the largest output, and what was allocated when it was produced

    def note(_m: Any, _i: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.numel() * out.element_size() > largest[0]:
            largest[0], largest[1] = out.numel() * out.element_size(), torch.cuda.memory_allocated()

    hooks = [m.register_forward_hook(note) for m in model.modules()]
    loss = forward()
    kept = torch.cuda.memory_allocated()
    del loss
    for h in hooks:
        h.remove()
    weights = weight_bytes(model)
    return int(max(kept, largest[1] + 2 * largest[0]) + 2 * weights)


# Pressure kinds: ``peak`` leaves the headroom at the step's busiest moment only; ``backward`` also holds every tensor
# autograd saved until backward ends, so that backward (two thirds of the convolution work) runs as short of
# memory as that moment.
PRESSURE_KINDS = ("backward", "peak")
# Under ``backward`` pressure the ballast also leaves this much for what takes device memory outside the allocator
# once the ballast exists (the cuDNN kernels a run loads at their first use, the libraries' handles). Under ``peak``
# the estimate of the model's needs counts the tensors already allocated a second time, which left more (ResNet-18
# at N = 256 on an H200: 397 MiB unallocated at the peak with 256 MiB of headroom, what loaded outside the allocator
# included). Where it is too little, PyTorch alone runs out of memory and the headroom is doubled (run_configs).
LAZY_MARGIN = 128 * _MIB


class HeldActivations:
    """Every tensor autograd saves in a forward pass under ``saving()``, held until ``release()``: the memory that
    backward would hand back as it goes stays taken until the step's backward ends, as in a program whose memory
    stays at its peak through backward (another model's, another process's). Values and gradients are unchanged:
    the hooks hand autograd the very tensors it saved."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self.tensors: list[Any] = []

    def _pack(self, tensor: Any) -> Any:
        self.tensors.append(tensor)
        return tensor

    @staticmethod
    def _unpack(tensor: Any) -> Any:
        return tensor

    def saving(self) -> Any:
        return self._torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def release(self) -> None:
        self.tensors.clear()


def step_needs(torch: Any, model: Any, run_step: Callable[[], None]) -> int:
    """Bytes a training step allocates beyond what is allocated before it, measured on one forward and backward
    (``run_step``, under ``backward`` pressure with the saved tensors held), plus the optimizer's momentum (one
    buffer per weight, allocated at its first step and kept). No convolution workspace is counted: the step runs
    without cuDNN, so that no algorithm is chosen before the ballast exists."""
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run_step()
    model.zero_grad(set_to_none=True)
    weights = weight_bytes(model)
    return int(torch.cuda.max_memory_allocated() - base + weights)


# ---- the checks of new plans ----


def open_checks(stats: dict[str, Any]) -> int:
    """Checks of new plans on real executions begun and not yet ended, legacy and graph paths together."""
    legacy = int(stats.get("checks_started", 0)) - int(stats.get("verified", 0))
    graph = int(stats.get("graph_checks_started", 0)) - int(stats.get("graph_verified", 0))
    return max(0, legacy) + max(0, graph)


def settle(step: Callable[[], None], still_open: Callable[[], int], most: int, patience: int) -> int:
    """Run ``step`` while checks are open, at most ``most`` times, and stop early once ``patience`` steps in a row
    changed nothing (a check whose plan the framework no longer runs never ends): the number of steps run."""
    ran = calm = 0
    last = still_open()
    while last > 0 and ran < most and calm < patience:
        step()
        ran += 1
        now = still_open()
        calm = calm + 1 if now == last else 0
        last = now
    return ran


def _shim_stats() -> Callable[[], dict[str, Any]] | None:
    """The preload library's counters, where this process runs under it."""
    try:
        from ucudnn import bridge
    except ImportError:
        return None
    return bridge.stats if bridge.shim_loaded() else None


# ---- the run ----


class Training:
    """The model on the GPU, its synthetic batch (the same seeds in every run) and a training step; under
    ``backward`` pressure, every forward's saved tensors held until its backward ends."""

    def __init__(self, torch: Any, args: argparse.Namespace) -> None:
        self.torch = torch
        dev = torch.device("cuda")
        torch.manual_seed(0)
        built, classes = build_model(args.model)
        self.model = built.to(dev)
        gen = torch.Generator(device=dev).manual_seed(1)
        self.x = torch.randn(*input_shape(args.model, args.batch, args.image, args.frames), device=dev, generator=gen)
        if args.channels_last:  # PyTorch's channels-last (NHWC) training: weights and input in that memory format
            fmt = torch.channels_last_3d if args.model == CONV3D else torch.channels_last
            self.model = self.model.to(memory_format=fmt)
            self.x = self.x.contiguous(memory_format=fmt)
        self.initial = {k: v.clone() for k, v in self.model.state_dict().items()}

        # bfloat16: mixed precision as PyTorch's AMP runs it (the convolutions in bfloat16, the weights in float32;
        # no loss scaling needed); float32: none.
        def bf16_autocast() -> Any:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)

        self.autocast: Callable[[], Any] = bf16_autocast if args.precision == "bfloat16" else contextlib.nullcontext
        self.target = torch.randint(0, classes, (args.batch,), device=dev, generator=gen)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        pressed = args.headroom is not None
        self.held = HeldActivations(torch) if pressed and args.pressure == "backward" else None

    def loss(self) -> Any:
        """The forward pass alone: the loss."""
        with self.autocast():
            return self.loss_fn(self.model(self.x), self.target)

    def forward_backward(self, opt: Any | None) -> Any:
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        with self.held.saving() if self.held is not None else contextlib.nullcontext():
            loss = self.loss()
        loss.backward()
        if self.held is not None:
            self.held.release()
        return loss

    def step(self, opt: Any) -> Any:
        loss = self.forward_backward(opt)
        opt.step()
        return loss.detach()


def _needs(training: Training) -> int:
    """What a step needs besides workspaces, measured without cuDNN: with it, PyTorch's benchmark mode (and ucudnn)
    would choose the forward convolutions' algorithms now, with the memory the ballast is about to take still
    free."""
    torch = training.torch
    enabled = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = False
    try:
        if training.held is not None:
            return step_needs(torch, training.model, lambda: training.forward_backward(None))
        return model_needs(torch, training.model, training.loss)
    finally:
        torch.backends.cudnn.enabled = enabled
        training.model.load_state_dict(training.initial)  # the forward pass moved batch-norm statistics


def ballast(training: Training, headroom: int) -> tuple[Any, int]:
    """The tensor that takes what the step does not need but ``headroom`` (under ``backward`` pressure, and
    LAZY_MARGIN), and what this process's tensors could take, ballast included."""
    torch = training.torch
    need = _needs(training)
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    # What this process's tensors could take: the free memory and all the allocator holds. Not only what is
    # allocated: a segment empty_cache cannot release (one block of it in use) is handed out again.
    usable = free + torch.cuda.memory_reserved()
    if training.held is not None:
        # `need` is what the step allocates beyond what is allocated now: the ballast takes the rest of what the
        # process could allocate, but the headroom and the margin for what loads outside the allocator.
        room = usable - torch.cuda.memory_allocated() - need - headroom - LAZY_MARGIN
    else:
        # `need` counts what is already allocated (the weights, their initial copy, the input), which `free` no
        # longer holds: the ballast leaves those bytes a second time, a margin (about 250 MB for ResNet-18 at
        # N = 256) for what loads after it (the cuDNN kernels backward uses, loaded lazily).
        room = free - need - headroom
    tensor = torch.empty(max(0, room), dtype=torch.uint8, device=torch.device("cuda"))
    torch.cuda.reset_peak_memory_stats()
    return tensor, usable


def train(training: Training, args: argparse.Namespace) -> dict[str, Any]:
    """Warm-up, settling (a ucudnn run's open checks), then the timed iterations: the figures the parent reads."""
    torch = training.torch
    opt = torch.optim.SGD(training.model.parameters(), lr=0.01, momentum=0.9)
    losses: list[Any] = []
    events: list[tuple[Any, Any]] = []
    shim = _shim_stats()
    settled = open_at_timing = 0

    def unchanged_step() -> None:
        # Forward and backward only: every convolution runs (the checks advance), the weights stay, so the losses
        # that follow are those PyTorch alone gets at the same iteration.
        training.forward_backward(opt)
        torch.cuda.synchronize()  # the check's timings are read at the next execution once complete

    for i in range(args.warmup + args.iters):
        if i == args.warmup and shim is not None:
            torch.cuda.synchronize()
            settled = settle(unchanged_step, lambda: open_checks(shim()), args.settle, SETTLE_PATIENCE)
            open_at_timing = open_checks(shim())
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        losses.append(training.step(opt))
        end.record()
        if i >= args.warmup:
            events.append((start, end))
    torch.cuda.synchronize()
    return {
        "ms_per_iter": statistics.median(start.elapsed_time(end) for start, end in events),
        "losses": [float(v) for v in losses],
        "peak_mib": torch.cuda.max_memory_allocated() / _MIB,
        "settle_iters": settled,
        "checks_open": open_at_timing,
    }


def run(args: argparse.Namespace) -> int:
    import torch

    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    training = Training(torch, args)
    pressed, usable = None, 0
    if args.headroom is not None:
        pressed, usable = ballast(training, args.headroom)
    out = train(training, args)
    out["ballast_mib"] = (pressed.numel() if pressed is not None else 0) / _MIB
    # How much of the headroom the run's busiest moment left unused (under ``peak`` pressure the estimate of the
    # model's needs is made at the peak of activations; workspaces late in backward find more).
    out["left_at_peak_mib"] = (usable - torch.cuda.max_memory_allocated()) / _MIB if pressed is not None else None
    Path(args.out).write_text(json.dumps(out))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ucudnn.bench.torch_worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help=f"a torchvision model's name, or {CONV3D}")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--out", type=Path, required=True, help="where the figures go (JSON)")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--settle", type=int, default=40)
    p.add_argument("--headroom-bytes", dest="headroom", type=int, help="under memory pressure: the headroom")
    p.add_argument("--pressure", choices=PRESSURE_KINDS, default="backward")
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false")
    p.add_argument("--precision", choices=PRECISIONS, default="float32")
    p.add_argument("--channels-last", action="store_true")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
