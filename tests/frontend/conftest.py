"""Fixtures of the real-client tier: the programs built against the real cudnn_frontend headers (skipped, with
what to install, where the wheels are absent), the problem data, and runs with and without the preload library."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tests._env import real_client_missing
from ucudnn import _paths
from ucudnn import testing as T

from . import _build


@pytest.fixture(scope="session")
def programs() -> _build.Programs:
    if not _paths.HOST_CUDNN.exists():
        pytest.fail(f"the host backend is not built ({_paths.HOST_CUDNN}): run `pip install -e .`", pytrace=False)
    try:
        return _build.build(_paths.HOST_CUDNN)
    except _build.Unavailable as exc:
        real_client_missing(f"real-client programs: {exc}")


@dataclass(frozen=True)
class Problem:
    """One convolution in PyTorch's tensor roles (x, w, y). By default NCHW, 3x3, padding 1, ``hw`` x ``hw``;
    ``size`` (2 or 3 extents: a 2-D or 3-D convolution), ``filt``, ``pad``, ``stride``, ``dil`` (one value per
    spatial dim), ``groups`` and ``layout`` (``nhwc``: channels last, as PyTorch's channels_last lays tensors out)
    describe any other. The data files hold the tensors in the layout's memory order."""

    op: str
    dtype: str = "float"
    n: int = 8
    c: int = 16
    k: int = 32
    hw: int = 16
    z_alpha: float = 0.5
    size: tuple[int, ...] = ()
    filt: tuple[int, ...] = ()
    pad: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    dil: tuple[int, ...] = ()
    groups: int = 1
    layout: str = "nchw"

    @property
    def extents(self) -> tuple[int, ...]:
        return self.size or (self.hw, self.hw)

    @property
    def np_dtype(self) -> npt.DTypeLike:
        """float32, float16, or T.BFLOAT16 (uint16 bit patterns) for ``bfloat16``."""
        if self.dtype == "half":
            return np.float16
        return T.BFLOAT16 if self.dtype == "bfloat16" else np.float32

    @property
    def params(self) -> T.ConvParams:
        nsp = len(self.extents)
        return T.ConvParams.make(
            nsp, pad=self.pad or 1, stride=self.stride or 1, dilation=self.dil or 1, groups=self.groups
        )

    @property
    def x_shape(self) -> tuple[int, ...]:
        return (self.n, self.c, *self.extents)

    @property
    def w_shape(self) -> tuple[int, ...]:
        return (self.k, self.c // self.groups, *(self.filt or (3,) * len(self.extents)))

    @property
    def y_shape(self) -> tuple[int, ...]:
        return T.output_shape(self.x_shape, self.w_shape, self.params)

    def args(self) -> list[str]:
        def joined(v: tuple[int, ...]) -> str:
            return ",".join(str(i) for i in v)

        ext, filt, prm = self.extents, self.w_shape[2:], self.params
        dims = {"n": self.n, "c": self.c, "k": self.k, "h": ext[-2], "w": ext[-1], "r": filt[-2], "s": filt[-1]}
        if len(ext) == 3:
            dims |= {"d": ext[0], "t": filt[0]}
        out = ["--op", self.op, "--dtype", self.dtype, "--z-alpha", repr(self.z_alpha)]
        out += ["--pad", joined(prm.pad), "--stride", joined(prm.stride), "--dil", joined(prm.dilation)]
        out += ["--groups", str(self.groups), "--layout", self.layout]
        for name, value in dims.items():
            out += [f"--{name}", str(value)]
        return out

    def to_memory(self, a: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A logical NC[D]HW array in the layout's memory order."""
        return np.ascontiguousarray(np.moveaxis(a, 1, -1)) if self.layout == "nhwc" and a.ndim > 2 else a

    def from_memory(self, flat: npt.NDArray[Any], shape: tuple[int, ...]) -> npt.NDArray[Any]:
        """The logical NC[D]HW array of ``shape`` from its bytes in the layout's memory order."""
        if self.layout != "nhwc":
            return flat.reshape(shape)
        return np.moveaxis(flat.reshape((shape[0], *shape[2:], shape[1])), -1, 1)


@dataclass
class Inputs:
    """The buffers a program reads; the op's output starts as NaN so an unwritten output cannot pass."""

    x: npt.NDArray[Any]
    w: npt.NDArray[Any]
    y: npt.NDArray[Any]
    z: npt.NDArray[Any] = field(default_factory=lambda: np.zeros(0))
    b: npt.NDArray[Any] = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def make(cls, p: Problem, seed: int = 0) -> Inputs:
        rng = np.random.default_rng(seed)

        def rand(*shape: int) -> npt.NDArray[Any]:
            return T.to_layout(rng.standard_normal(shape), "NCHW", p.np_dtype)

        x, w, y = rand(*p.x_shape), rand(*p.w_shape), rand(*p.y_shape)
        out = {"fprop": "y", "fused": "y", "dgrad": "x", "wgrad": "w"}[p.op]
        made = {"x": x, "w": w, "y": y}
        nan = 0x7FC0 if np.dtype(p.np_dtype) == T.BFLOAT16 else np.nan  # a bfloat16 quiet NaN's bits
        made[out] = np.full_like(made[out], nan)
        bias = (1, p.k) + (1,) * len(p.extents)
        z = rand(*p.y_shape) if p.op == "fused" else np.zeros(0, p.np_dtype)
        b = rand(*bias) if p.op == "fused" else np.zeros(0, p.np_dtype)
        return cls(made["x"], made["w"], made["y"], z, b)

    def write(self, folder: Path, p: Problem) -> None:
        for name in ("x", "w", "y", "z", "b"):
            p.to_memory(getattr(self, name)).tofile(folder / f"{name}.bin")

    def reference(self, p: Problem) -> npt.NDArray[np.floating[Any]]:
        """What the op computes, in float64 from the (rounded) inputs."""
        if p.op == "dgrad":
            return T.conv_backward_data(self.w, self.y, p.params, self.x.shape)
        if p.op == "wgrad":
            return T.conv_backward_filter(self.x, self.y, p.params, self.w.shape)
        y = T.conv_forward(self.x, self.w, p.params)
        if p.op == "fused":
            y = np.maximum(y + p.z_alpha * T.as_float64(self.z) + T.as_float64(self.b), 0.0)
        return y

    def output_shape(self, p: Problem) -> tuple[int, ...]:
        return {"dgrad": self.x.shape, "wgrad": self.w.shape}.get(p.op, self.y.shape)


@dataclass
class Run:
    report: dict[str, Any]
    stats: dict[str, Any]
    output: npt.NDArray[Any] | None
    returncode: int
    stderr: str


def base_env(tmp: Path) -> dict[str, str]:
    """No UCUDNN_* from outside; deterministic host timings; plans and benchmarks in a scratch cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "LD_PRELOAD"}
    env["LD_LIBRARY_PATH"] = str(_paths.LIB_DIR)
    env["UCUDNN_HOST_TIMING"] = "model"
    env["UCUDNN_DATABASE"] = str(tmp / "cache.sqlite")
    return env


RunClient = Callable[..., Run]


@pytest.fixture
def run_client(programs: _build.Programs, tmp_path: Path) -> RunClient:
    counter = iter(range(1000))

    def run(
        program: str,
        p: Problem,
        inputs: Inputs,
        *,
        capacity: int = 1 << 30,
        preload: bool = False,
        limit: str | None = None,
        extra: tuple[str, ...] = (),
        env_extra: dict[str, str] | None = None,
    ) -> Run:
        folder = tmp_path / f"run{next(counter)}"
        folder.mkdir()
        inputs.write(folder, p)
        env = base_env(tmp_path)
        env["CUDNN_FRONTEND_CUDART_LIB_NAME"] = str(programs.cudart)  # what the _dl programs' frontend dlopens
        stats_file = folder / "stats.json"
        if preload:
            env["LD_PRELOAD"] = str(_paths.PRELOAD)
            env["UCUDNN_STATS_FILE"] = str(stats_file)
        if limit is not None:
            env["UCUDNN_DEFAULT_WORKSPACE_LIMIT"] = limit
        env.update(env_extra or {})
        exe = getattr(programs, program)
        cmd = [str(exe), *p.args(), "--data", str(folder), "--capacity", str(capacity), *extra]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        assert lines, f"{program} printed no report: rc={proc.returncode} stderr={proc.stderr}"
        report = json.loads(lines[-1])
        out_file = folder / "out.bin"
        output = None
        if out_file.exists():
            output = p.from_memory(np.fromfile(out_file, dtype=p.np_dtype), inputs.output_shape(p))
        stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
        return Run(report, stats, output, proc.returncode, proc.stderr)

    return run
