"""``ucudnn.bench.torch_worker`` (one training run of ``torch_train``) without a GPU: the conv3d model, the
settling of open checks, the sizing of the ballast, and the run's loop on a stand-in torch."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ucudnn.bench import torch_worker as tw


def test_conv3d_model_runs_a_cpu_forward_where_torch_is_installed() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (the CPU forward needs it; CI has none)")
    model, classes = tw.build_model("conv3d")
    x = torch.randn(*tw.input_shape("conv3d", 2, 32, 8))
    out = model(x)
    assert tuple(out.shape) == (2, classes)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv3d)]
    assert len(convs) == 4 and all(m.kernel_size == (3, 3, 3) for m in convs)


def test_open_checks_counts_both_paths() -> None:
    assert tw.open_checks({}) == 0
    assert tw.open_checks({"checks_started": 6, "verified": 4, "graph_checks_started": 3, "graph_verified": 3}) == 2
    assert tw.open_checks({"graph_checks_started": 2, "graph_verified": 0}) == 2


def test_settle_runs_until_the_checks_end_or_stall() -> None:
    state = {"open": 2, "steps": 0}
    ends_at = {5: 1, 9: 0}  # one check ends after 5 steps, the other after 9

    def step() -> None:
        state["steps"] += 1
        state["open"] = ends_at.get(state["steps"], state["open"])

    assert tw.settle(step, lambda: state["open"], most=40, patience=12) == 9 and state["open"] == 0
    state.update(open=1, steps=0)
    ends_at.clear()  # a check whose plan no longer runs never ends: settling gives up after `patience` calm steps
    assert tw.settle(step, lambda: state["open"], most=40, patience=12) == 12
    state.update(open=1, steps=0)
    assert tw.settle(step, lambda: state["open"], most=3, patience=12) == 3
    state.update(open=0, steps=0)
    assert tw.settle(step, lambda: state["open"], most=40, patience=12) == 0 and state["steps"] == 0


class _StandInTorch:
    """Just enough of torch for the worker's loop, on no device: every convolution a step runs is one call of
    ``on_step``; the loss falls by 0.1 an optimizer step; memory figures are fixed."""

    def __init__(self, on_step: Any) -> None:
        import types

        self.on_step, self.steps, self.opt_steps = on_step, 0, 0
        self.cudnn_seen: list[bool] = []  # torch.backends.cudnn.enabled at each forward
        self.autocast_seen: list[Any] = []  # the autocast dtype active at each forward (None: none)
        self.formats: list[tuple[str, Any]] = []  # (what, memory_format) of every conversion
        self.active_autocast: Any = None
        self.saving: Any = None  # the pack hook of saved_tensors_hooks while one is active
        self.held_seen: list[int] = []  # at each forward: tensors a pack hook returned, not yet released
        self.packs: list[Any] = []  # every pack hook a forward saved a tensor through
        torch = self

        class Tensor:
            def __init__(self, value: float = 0.0, n: int = 1) -> None:
                self.value, self.n = value, n

            def clone(self) -> Tensor:
                return Tensor(self.value, self.n)

            def numel(self) -> int:
                return self.n

            def element_size(self) -> int:
                return 4

            def detach(self) -> Tensor:
                return self

            def contiguous(self, memory_format: Any = None) -> Tensor:
                torch.formats.append(("input", memory_format))
                return self

            def backward(self) -> None:
                pass

            def __float__(self) -> float:
                return self.value

        class Model:
            def to(self, _dev: Any = None, memory_format: Any = None) -> Model:
                if memory_format is not None:
                    torch.formats.append(("model", memory_format))
                return self

            def __call__(self, _x: Any) -> Tensor:
                torch.steps += 1
                torch.cudnn_seen.append(torch.backends.cudnn.enabled)
                torch.autocast_seen.append(torch.active_autocast)
                owner = getattr(torch.saving, "__self__", None)
                torch.held_seen.append(len(owner.tensors) if owner is not None else -1)
                if torch.saving is not None:
                    torch.packs.append(torch.saving)
                    assert torch.saving(saved := Tensor(1.0, 5)) is saved  # autograd gets back what it saved
                torch.on_step()
                return Tensor()

            def zero_grad(self, set_to_none: bool = False) -> None:
                pass

            def state_dict(self) -> dict[str, Tensor]:
                return {"w": Tensor(1.0, 10)}

            def load_state_dict(self, _d: Any) -> None:
                pass

            def modules(self) -> list[Model]:
                return [self]

            def register_forward_hook(self, _fn: Any) -> Any:
                return types.SimpleNamespace(remove=lambda: None)

            def parameters(self) -> list[Tensor]:
                return [Tensor(1.0, 10)]

        class SGD:
            def __init__(self, _params: Any, lr: float, momentum: float) -> None:
                pass

            def zero_grad(self, set_to_none: bool = False) -> None:
                pass

            def step(self) -> None:
                torch.opt_steps += 1

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                pass

            def record(self) -> None:
                pass

            def elapsed_time(self, _other: Any) -> float:
                return 5.0

        self.Tensor, self.model, self.uint8 = Tensor, Model(), "uint8"
        self.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(benchmark=False, enabled=True))
        self.device = lambda _name: "cuda"
        self.manual_seed = lambda _seed: None
        self.Generator = lambda device: types.SimpleNamespace(manual_seed=lambda _s: None)
        self.randn = lambda *shape, device, generator: Tensor()
        self.randint = lambda lo, hi, shape, device, generator: Tensor()
        self.empty = lambda n, dtype, device: Tensor(0.0, n)
        self.nn = types.SimpleNamespace(CrossEntropyLoss=lambda: lambda out, target: Tensor(7.0 - 0.1 * self.opt_steps))
        self.optim = types.SimpleNamespace(SGD=SGD)

        @contextlib.contextmanager
        def saved_tensors_hooks(pack: Any, unpack: Any) -> Iterator[None]:
            torch.saving = pack
            try:
                yield
            finally:
                torch.saving = None

        self.autograd = types.SimpleNamespace(graph=types.SimpleNamespace(saved_tensors_hooks=saved_tensors_hooks))

        @contextlib.contextmanager
        def autocast(device_type: str, dtype: Any) -> Iterator[None]:
            assert device_type == "cuda"
            torch.active_autocast = dtype
            try:
                yield
            finally:
                torch.active_autocast = None

        self.autocast, self.bfloat16 = autocast, "bfloat16"
        self.channels_last, self.channels_last_3d = "channels_last", "channels_last_3d"
        self.cuda = types.SimpleNamespace(
            Event=Event, synchronize=lambda: None, memory_allocated=lambda: 100 << 20, empty_cache=lambda: None,
            memory_reserved=lambda: 160 << 20,
            mem_get_info=lambda: (1000 << 20, 2000 << 20), reset_peak_memory_stats=lambda: None,
            max_memory_allocated=lambda: 900 << 20,
        )  # fmt: skip


def test_worker_settles_the_checks_then_times_with_the_weights_unchanged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The worker's loop on a stand-in torch under a stand-in shim: after the warm-up it runs forward/backward steps
    without optimizer steps until the open check ends, then times the iterations; the losses are those of
    warm-up + timed optimizer steps only, as PyTorch alone's run has them; under pressure it sizes the ballast."""
    import sys

    stats = {"checks_started": 1, "verified": 0}

    def on_step() -> None:  # the check ends at the 12th execution of its kernel (one per forward)
        if fake.steps == 12:
            stats["verified"] = 1

    fake = _StandInTorch(on_step)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(tw, "build_model", lambda name: (fake.model, 10))
    monkeypatch.setattr(tw, "_shim_stats", lambda: lambda: dict(stats))
    out = tmp_path / "w.json"
    argv = ["--model", "resnet18", "--batch", "4", "--warmup", "3", "--iters", "4", "--out", str(out),
            "--headroom-bytes", str(256 << 20), "--pressure", "peak"]  # fmt: skip
    assert tw.main(argv) == 0
    got = json.loads(out.read_text())
    assert not fake.packs  # at the peak only: nothing held
    # One measuring forward for the ballast, 3 warm-up steps, then 8 settling forwards to reach the 12th execution.
    assert got["settle_iters"] == 8 and got["checks_open"] == 0
    # The measuring forward ran without cuDNN (no algorithm chosen before the ballast), every other one with it.
    assert fake.cudnn_seen[0] is False and all(fake.cudnn_seen[1:]) and len(fake.cudnn_seen) == 1 + 3 + 8 + 4
    assert fake.opt_steps == 7 and got["losses"] == pytest.approx([7.0 - 0.1 * i for i in range(7)])
    assert got["ms_per_iter"] == 5.0
    # usable: 1000 MiB free + 160 MiB the allocator holds (100 MiB of it allocated); the peak 900 MiB
    assert got["left_at_peak_mib"] == pytest.approx(260.0) and got["ballast_mib"] > 0


def test_backward_pressure_holds_the_saved_tensors_through_backward_and_sizes_from_a_measured_step(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The default pressure: the ballast is sized from one measured forward and backward (without cuDNN, the saved
    tensors held as in every step), and every step's forward saves its tensors through the hook that holds them;
    they are released when backward ends, before the next forward."""
    import sys

    fake = _StandInTorch(lambda: None)
    fake.cuda.mem_get_info = lambda: (4000 << 20, 8000 << 20)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(tw, "build_model", lambda name: (fake.model, 10))
    monkeypatch.setattr(tw, "_shim_stats", lambda: None)
    out = tmp_path / "w.json"
    argv = ["--model", "resnet18", "--batch", "4", "--warmup", "2", "--iters", "3", "--out", str(out),
            "--headroom-bytes", str(256 << 20)]  # fmt: skip
    assert tw.main(argv) == 0
    got = json.loads(out.read_text())
    # One measuring step without cuDNN, then 2 + 3 steps with it; every forward saved through the holding hook, and
    # found nothing held from the step before.
    assert fake.cudnn_seen == [False] + [True] * 5
    assert len(fake.packs) == 6 and len({id(h.__self__) for h in fake.packs}) == 1
    assert fake.held_seen == [0] * 6
    # The step's need: the measured peak 900 MiB less the 100 MiB allocated before it, and the momentum (40 bytes of
    # weights); the ballast takes what the process could allocate (4000 MiB free + 160 MiB held by the allocator,
    # 100 MiB of it allocated) but that need, the headroom and the margin for what loads outside the allocator.
    want = (4000 << 20) + (160 << 20) - (100 << 20) - ((800 << 20) + 40) - (256 << 20) - tw.LAZY_MARGIN
    assert got["ballast_mib"] == pytest.approx(want / (1 << 20))


@pytest.mark.parametrize(("model", "fmt"), [("resnet18", "channels_last"), ("conv3d", "channels_last_3d")])
def test_bfloat16_and_channels_last_apply_to_every_forward(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, model: str, fmt: str
) -> None:
    """``--precision bfloat16``: every forward (the measuring one under pressure too) runs under torch.autocast in
    bfloat16; ``--channels-last``: the model and its input are converted once, to the model's channels-last format.
    By default neither."""
    import sys

    for extra, autocast, formats in (
        ([], None, []),
        (["--precision", "bfloat16", "--channels-last"], "bfloat16", [("model", fmt), ("input", fmt)]),
    ):
        fake = _StandInTorch(lambda: None)
        monkeypatch.setitem(sys.modules, "torch", fake)
        monkeypatch.setattr(tw, "build_model", lambda name, m=fake.model: (m, 10))
        monkeypatch.setattr(tw, "_shim_stats", lambda: None)
        out = tmp_path / "w.json"
        argv = ["--model", model, "--batch", "4", "--warmup", "1", "--iters", "2", "--out", str(out),
                "--headroom-bytes", str(256 << 20), *extra]  # fmt: skip
        assert tw.main(argv) == 0
        assert fake.autocast_seen == [autocast] * 4 and fake.formats == formats, (extra, fake.formats)


def _needs(outputs_mib: list[int], weights_mib: int) -> int:
    """model_needs on a stand-in network whose modules, run in order, each allocate an output of the given size (MiB)
    that the forward pass keeps, after a 10 MiB input and the weights."""
    import types

    mib = 1 << 20
    allocated = [(10 + weights_mib) * mib]

    class Tensor:
        def __init__(self, nbytes: int) -> None:
            self.nbytes = nbytes

        def numel(self) -> int:
            return self.nbytes // 4

        def element_size(self) -> int:
            return 4

    class Module:
        def __init__(self, out_mib: int) -> None:
            self.out_mib = out_mib
            self.hooks: list[Any] = []

        def register_forward_hook(self, fn: Any) -> Any:
            self.hooks.append(fn)
            return types.SimpleNamespace(remove=lambda: self.hooks.remove(fn))

    modules = [Module(m) for m in outputs_mib]

    def forward() -> Any:
        for m in modules:
            allocated[0] += m.out_mib * mib
            out = Tensor(m.out_mib * mib)
            for fn in list(m.hooks):
                fn(m, None, out)
        return Tensor(4)

    torch = types.SimpleNamespace(Tensor=Tensor, cuda=types.SimpleNamespace(memory_allocated=lambda: allocated[0]))
    model = types.SimpleNamespace(modules=lambda: modules, parameters=lambda: [Tensor(weights_mib * mib)])
    need: int = tw.model_needs(torch, model, forward)
    assert all(not m.hooks for m in modules)  # the hooks are removed
    return need // mib


def test_model_needs_count_the_largest_activations_gradients_only_where_they_coexist() -> None:
    # Largest activation first (ResNet's stem): at the peak, as backward starts, everything kept; the stem's two
    # gradients come late in backward, with only the activations saved up to the stem: 10 + 5 + 100 + 2 * 100 = 315.
    assert _needs([100, 50, 50, 50, 50, 20], weights_mib=5) == max(10 + 5 + 320, 315) + 2 * 5
    # Largest activation last: what was allocated then plus its two gradients.
    assert _needs([20, 50, 100], weights_mib=5) == 10 + 5 + 170 + 2 * 100 + 2 * 5
