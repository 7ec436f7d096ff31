"""Helpers for the graph (backend) API tests.

``Backend`` (from ucudnn.graph_api) is a thin ctypes view of the six ``cudnnBackend*`` calls of any libcudnn.so.9
(the host backend or the real library), returning raw statuses, with builders for the descriptors cudnn_frontend
makes. ``Driver``
compiles tests/host/graph_driver.c (cached by a hash of its sources) against the host backend and runs whole
graphs on NumPy arrays: it builds them in C exactly as cudnn_frontend does, so the Python side only prepares data
and compares results.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tests._env import ROOT
from ucudnn.graph_api import (  # noqa: F401  (re-exported: the tests use them as G.<name>)
    A_BWD_DATA,
    A_BWD_FILTER,
    A_CFG_ENGINE,
    A_CFG_KNOBS,
    A_CFG_WS,
    A_CONV_COMP,
    A_CONV_DIL,
    A_CONV_MODE,
    A_CONV_NSP,
    A_CONV_POST,
    A_CONV_PRE,
    A_CONV_STRIDES,
    A_ENGINE_GRAPH,
    A_ENGINE_INDEX,
    A_ENGINE_KNOBS,
    A_ENGINE_NOTES,
    A_FWD,
    A_GRAPH_COUNT,
    A_GRAPH_HANDLE,
    A_GRAPH_OPS,
    A_HEUR_GRAPH,
    A_HEUR_MODE,
    A_HEUR_RESULTS,
    A_PLAN_CFG,
    A_PLAN_HANDLE,
    A_PLAN_WS,
    A_PW_MODE,
    A_PW_PREC,
    A_PWOP_ALPHA1,
    A_PWOP_ALPHA2,
    A_PWOP_B,
    A_PWOP_DESC,
    A_PWOP_X,
    A_PWOP_Y,
    A_T_ALIGN,
    A_T_DIMS,
    A_T_DTYPE,
    A_T_STRIDES,
    A_T_UID,
    A_T_VCOUNT,
    A_T_VDIM,
    A_T_VIRTUAL,
    A_VP_INTERMEDIATES,
    A_VP_PTRS,
    A_VP_UIDS,
    A_VP_WS,
    BFLOAT16,
    CONVOLUTION,
    DOUBLE,
    ENGINE,
    ENGINECFG,
    ENGINEHEUR,
    FLOAT,
    HALF,
    HEUR_A,
    HEUR_FALLBACK,
    HEUR_INSTANT,
    I64,
    KNOB_CHOICE,
    KNOB_INFO,
    NOTE_DOWN_CONVERT,
    NOTE_FFT,
    NOTE_NONDETERMINISTIC,
    NOTE_REDUCED_PRECISION,
    NOTE_WINOGRAD,
    OP_BASE,
    OP_BWD_DATA,
    OP_BWD_FILTER,
    OP_FWD,
    OP_KIND,
    OP_POINTWISE,
    OPGRAPH,
    PLAN,
    POINTWISE,
    PW_ADD,
    PW_IDENTITY,
    PW_MUL,
    PW_RELU,
    T_BOOLEAN,
    T_CONV_MODE,
    T_DATA_TYPE,
    T_DESC,
    T_DOUBLE,
    T_FLOAT,
    T_HANDLE,
    T_HEUR_MODE,
    T_INT32,
    T_INT64,
    T_NOTE,
    T_PW_MODE,
    T_VOID_PTR,
    TENSOR,
    VARIANT_PACK,
    Backend,
    GraphApiError,
    P,
    i64s,
    packed_strides,
)
from ucudnn.testing import ConvParams, element_strides

from ._cbuild import cached_library

DRIVER = Path(__file__).with_name("graph_driver.c")
INCLUDE = ROOT / "shim" / "include"


# ---- the C driver ----
class Spec(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("nb", ctypes.c_int),
        *((name, I64 * 5) for name in ("xdim", "xstr", "wdim", "wstr", "ydim", "ystr")),
        *((name, I64 * 3) for name in ("pad", "stride", "dil")),
        ("mode", ctypes.c_int),
        ("alpha", ctypes.c_double),
        ("beta", ctypes.c_double),
        ("engine", I64),
        ("heur_mode", ctypes.c_int),
        ("heur_rank", ctypes.c_int),
        ("x", P),
        ("w", P),
        ("y", P),
        ("fused", ctypes.c_int),
        ("zstr", I64 * 5),
        ("z", P),
        ("bias", P),
        ("z_alpha", ctypes.c_double),
        ("virtual_dtype", ctypes.c_int),
        ("execute", ctypes.c_int),
        ("repeat", ctypes.c_int),
        ("order", ctypes.c_int),
        ("benchmark", ctypes.c_int),
        ("capacity", I64),
        ("bench_limit", ctypes.c_int),
    ]


class Result(ctypes.Structure):
    _fields_ = [
        ("status", ctypes.c_int),
        ("stage", ctypes.c_int),
        ("global_count", I64),
        ("nheur", I64),
        ("heur", I64 * 16),
        ("engine", I64),
        ("workspace", I64),
        ("cfg_workspace", I64),
        ("nnotes", ctypes.c_int),
        ("notes", ctypes.c_int * 8),
        ("model_ms", ctypes.c_double),
        ("nconfigs", ctypes.c_int),
        ("nplans", ctypes.c_int),
        ("ran", ctypes.c_int),
    ]


STAGES = ["ok", "tensor", "conv", "op", "graph", "heur", "engine", "cfg", "notes", "plan", "pack", "execute"]


@dataclass
class Outcome:
    status: int
    stage: str
    global_count: int
    heuristics: list[int]
    engine: int
    workspace: int
    cfg_workspace: int
    notes: list[int]
    model_ms: float
    configs: int = 0  # the real order: configurations the heuristics gave, plans built, the one that ran (-1)
    plans: int = 0
    ran: int = -1


DTYPE_CODE = {np.dtype(np.float32): FLOAT, np.dtype(np.float64): DOUBLE, np.dtype(np.float16): HALF}


def build_driver(host_lib: Path) -> Path:
    """Compile graph_driver.c against the host backend (once per source state); returns the library path."""
    args = ["-O1", "-I", str(INCLUDE), str(DRIVER), str(host_lib), f"-Wl,-rpath,{host_lib.parent}"]
    return cached_library("graphdrv", [DRIVER, *sorted(INCLUDE.rglob("*.h"))], args)


class Driver:
    def __init__(self, host_lib: Path) -> None:
        self.lib = ctypes.CDLL(str(build_driver(host_lib)))
        self.lib.gd_spec_size.restype = ctypes.c_size_t
        self.lib.gd_result_size.restype = ctypes.c_size_t
        assert self.lib.gd_spec_size() == ctypes.sizeof(Spec), "graph_driver.c's gd_spec changed"
        assert self.lib.gd_result_size() == ctypes.sizeof(Result), "graph_driver.c's gd_result changed"

    def run(
        self,
        op: int,
        x: npt.NDArray[Any],
        w: npt.NDArray[Any],
        y: npt.NDArray[Any],
        params: ConvParams,
        *,
        engine: int = -1,
        heur_mode: int = HEUR_A,
        heur_rank: int = 0,
        alpha: float = 1.0,
        beta: float = 0.0,
        execute: bool = True,
        repeat: int = 1,
        fused: tuple[npt.NDArray[Any], npt.NDArray[Any], float] | None = None,
        virtual_dtype: int = FLOAT,
        real_order: bool = False,
        benchmark: bool = False,
        capacity: int = -1,
        bench_limit: int = 10,
    ) -> Outcome:
        """Build op's graph on these arrays (x/dx, w/dw, y/dy: logical NCHW views of any strides) and run it
        in place. ``fused=(z, bias, z_alpha)`` builds conv + add + bias + relu (forward, y the output).
        ``real_order``: PyTorch 2.11's order (graph_driver.c's run_real) in its ``benchmark`` mode, with a caching
        allocator whose largest block is ``capacity`` bytes (-1: unlimited); ``engine`` >= 0 then ranks that
        engine's configurations first."""
        s = Spec()
        s.op, s.dtype, s.nb = op, DTYPE_CODE[x.dtype], x.ndim
        for name, a in (("x", x), ("w", w), ("y", y)):
            getattr(s, name + "dim")[: a.ndim] = list(a.shape)
            getattr(s, name + "str")[: a.ndim] = list(element_strides(a))
            setattr(s, name, a.ctypes.data)
        nsp = params.nb_spatial
        s.pad[:nsp], s.stride[:nsp], s.dil[:nsp] = list(params.pad), list(params.stride), list(params.dilation)
        s.mode = 1 if params.cross_correlation else 0
        s.alpha, s.beta = alpha, beta
        s.engine, s.heur_mode, s.heur_rank, s.execute, s.repeat = engine, heur_mode, heur_rank, int(execute), repeat
        s.order, s.benchmark, s.capacity, s.bench_limit = int(real_order), int(benchmark), capacity, bench_limit
        if fused is not None:
            z, bias, z_alpha = fused
            s.fused, s.z, s.bias, s.z_alpha = 1, z.ctypes.data, bias.ctypes.data, z_alpha
            s.zstr[: z.ndim] = list(element_strides(z))
            s.virtual_dtype = virtual_dtype
        r = Result()
        self.lib.gd_run(ctypes.byref(s), ctypes.byref(r))
        return Outcome(
            r.status,
            STAGES[r.stage],
            r.global_count,
            list(r.heur[: r.nheur]),
            r.engine,
            r.workspace,
            r.cfg_workspace,
            list(r.notes[: r.nnotes]),
            r.model_ms,
            r.nconfigs,
            r.nplans,
            r.ran,
        )
