"""Helpers for the graph (backend) API tests.

``Backend`` is a thin ctypes view of the six ``cudnnBackend*`` calls of any libcudnn.so.9 (the host backend or
the real library), returning raw statuses, with builders for the descriptors cudnn_frontend makes. ``Driver``
compiles tests/host/graph_driver.c (cached by a hash of its sources) against the host backend and runs whole
graphs on NumPy arrays: it builds them in C exactly as cudnn_frontend does, so the Python side only prepares data
and compares results.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ucudnn.testing import ConvParams, element_strides

from ._cbuild import cached_library

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("graph_driver.c")
INCLUDE = ROOT / "shim" / "include"

# cuDNN 9 enum values (checked against the wheel's cudnn_graph.h by test_graph_abi.py, through the C header).
POINTWISE, CONVOLUTION, ENGINE, ENGINECFG, ENGINEHEUR, PLAN = 0, 1, 2, 3, 4, 5
KNOB_CHOICE, KNOB_INFO = 7, 8
OP_FWD, OP_BWD_FILTER, OP_BWD_DATA, OP_POINTWISE, OPGRAPH, VARIANT_PACK, TENSOR = 10, 11, 12, 13, 15, 16, 17
T_HANDLE, T_DATA_TYPE, T_BOOLEAN, T_INT64, T_FLOAT, T_DOUBLE, T_VOID_PTR = 0, 1, 2, 3, 4, 5, 6
T_CONV_MODE, T_HEUR_MODE, T_NOTE, T_PW_MODE, T_DESC, T_INT32 = 7, 8, 11, 14, 15, 23
A_PW_MODE, A_PW_PREC = 0, 1
A_CONV_COMP, A_CONV_MODE, A_CONV_DIL, A_CONV_STRIDES, A_CONV_POST, A_CONV_PRE, A_CONV_NSP = (
    100,
    101,
    102,
    103,
    104,
    105,
    106,
)
A_HEUR_MODE, A_HEUR_GRAPH, A_HEUR_RESULTS = 200, 201, 202
A_CFG_ENGINE, A_CFG_KNOBS, A_CFG_WS = 300, 302, 303
A_PLAN_HANDLE, A_PLAN_CFG, A_PLAN_WS = 400, 401, 402
A_FWD = 700  # alpha; +1 beta, +2 conv, +3 W, +4 X, +5 Y
A_BWD_DATA, A_BWD_FILTER = 706, 712
A_PWOP_DESC, A_PWOP_X, A_PWOP_B, A_PWOP_Y, A_PWOP_ALPHA1, A_PWOP_ALPHA2 = 750, 751, 752, 753, 754, 755
A_GRAPH_HANDLE, A_GRAPH_OPS, A_GRAPH_COUNT = 800, 801, 802
A_T_ALIGN, A_T_DTYPE, A_T_DIMS, A_T_STRIDES, A_T_VCOUNT, A_T_VDIM, A_T_UID, A_T_VIRTUAL = range(900, 908)
A_VP_UIDS, A_VP_PTRS, A_VP_INTERMEDIATES, A_VP_WS = 1000, 1001, 1002, 1003
A_ENGINE_GRAPH, A_ENGINE_INDEX, A_ENGINE_KNOBS, A_ENGINE_NOTES = 1300, 1301, 1302, 1303
NOTE_NONDETERMINISTIC, NOTE_REDUCED_PRECISION, NOTE_WINOGRAD, NOTE_DOWN_CONVERT = 4, 2, 5, 1
PW_ADD, PW_MUL, PW_IDENTITY, PW_RELU = 0, 1, 21, 100
HEUR_INSTANT, HEUR_FALLBACK, HEUR_A = 0, 2, 3
FLOAT, DOUBLE, HALF, BFLOAT16 = 0, 1, 2, 9
OP_KIND = {0: OP_FWD, 1: OP_BWD_DATA, 2: OP_BWD_FILTER}
OP_BASE = {OP_FWD: A_FWD, OP_BWD_DATA: A_BWD_DATA, OP_BWD_FILTER: A_BWD_FILTER}

P = ctypes.c_void_p
I64 = ctypes.c_int64


def i64s(*values: int) -> Any:
    return (I64 * max(1, len(values)))(*values)


def packed_strides(dims: Sequence[int]) -> list[int]:
    strides = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    return strides


class Backend:
    """The backend calls of one library, statuses as plain ints; descriptors are ``ctypes.c_void_p``."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        lib.cudnnBackendCreateDescriptor.argtypes = [ctypes.c_int, P]
        lib.cudnnBackendDestroyDescriptor.argtypes = [P]
        lib.cudnnBackendFinalize.argtypes = [P]
        lib.cudnnBackendSetAttribute.argtypes = [P, ctypes.c_int, ctypes.c_int, I64, P]
        lib.cudnnBackendGetAttribute.argtypes = [P, ctypes.c_int, ctypes.c_int, I64, P, P]
        lib.cudnnBackendExecute.argtypes = [P, P, P]
        self.made: list[P] = []

    def create_status(self, kind: int) -> tuple[int, P]:
        d = P()
        return int(self.lib.cudnnBackendCreateDescriptor(kind, ctypes.byref(d))), d

    def create(self, kind: int) -> P:
        st, d = self.create_status(kind)
        assert st == 0, f"create {kind}: {st}"
        self.made.append(d)
        return d

    def destroy_all(self) -> None:
        for d in self.made:
            self.lib.cudnnBackendDestroyDescriptor(d)
        self.made.clear()

    def set(self, d: P | None, name: int, typ: int, count: int, elems: Any) -> int:
        ptr = None if elems is None else ctypes.cast(elems, P)
        return int(self.lib.cudnnBackendSetAttribute(d, name, typ, count, ptr))

    def set_desc(self, d: P, name: int, *descs: P | None) -> int:
        return self.set(d, name, T_DESC, len(descs), (P * len(descs))(*[x.value if x else None for x in descs]))

    def get(self, d: P | None, name: int, typ: int, requested: int, buf: Any) -> tuple[int, int]:
        n = I64(-7)
        ptr = None if buf is None else ctypes.cast(buf, P)
        return int(self.lib.cudnnBackendGetAttribute(d, name, typ, requested, ctypes.byref(n), ptr)), n.value

    def finalize(self, d: P | None) -> int:
        return int(self.lib.cudnnBackendFinalize(d))

    def get_int64(self, d: P, name: int) -> tuple[int, int]:
        out = i64s(-7)
        st, _ = self.get(d, name, T_INT64, 1, out)
        return st, int(out[0])

    # ---- builders: (descriptor, list of statuses); finalize=True appends Finalize's status ----
    def tensor(
        self,
        uid: int,
        dims: Sequence[int],
        strides: Sequence[int] | None = None,
        *,
        dtype: int = FLOAT,
        align: int = 16,
        virtual: bool = False,
        skip: Sequence[int] = (),
        finalize: bool = True,
    ) -> tuple[P, list[int]]:
        t = self.create(TENSOR)
        strides = packed_strides(dims) if strides is None else strides
        steps: list[tuple[int, int, int, Any]] = [
            (A_T_DTYPE, T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(dtype))),
            (A_T_DIMS, T_INT64, len(dims), i64s(*dims)),
            (A_T_STRIDES, T_INT64, len(strides), i64s(*strides)),
            (A_T_UID, T_INT64, 1, i64s(uid)),
            (A_T_ALIGN, T_INT64, 1, i64s(align)),
        ]
        if virtual:
            steps.append((A_T_VIRTUAL, T_BOOLEAN, 1, ctypes.byref(ctypes.c_bool(True))))
        sts = [self.set(t, n, ty, c, e) for n, ty, c, e in steps if n not in skip]
        if finalize:
            sts.append(self.finalize(t))
        return t, sts

    def conv(
        self,
        nsp: int = 2,
        pad: Sequence[int] = (1, 1),
        post: Sequence[int] | None = None,
        stride: Sequence[int] = (1, 1),
        dil: Sequence[int] = (1, 1),
        *,
        mode: int = 1,
        comp: int = FLOAT,
        skip: Sequence[int] = (),
        finalize: bool = True,
    ) -> tuple[P, list[int]]:
        c = self.create(CONVOLUTION)
        post = pad if post is None else post
        steps: list[tuple[int, int, int, Any]] = [
            (A_CONV_NSP, T_INT64, 1, i64s(nsp)),
            (A_CONV_COMP, T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(comp))),
            (A_CONV_MODE, T_CONV_MODE, 1, ctypes.byref(ctypes.c_int(mode))),
            (A_CONV_DIL, T_INT64, len(dil), i64s(*dil)),
            (A_CONV_STRIDES, T_INT64, len(stride), i64s(*stride)),
            (A_CONV_PRE, T_INT64, len(pad), i64s(*pad)),
            (A_CONV_POST, T_INT64, len(post), i64s(*post)),
        ]
        sts = [self.set(c, n, ty, k, e) for n, ty, k, e in steps if n not in skip]
        if finalize:
            sts.append(self.finalize(c))
        return c, sts

    def conv_op(
        self,
        kind: int,
        x: P | None,
        w: P | None,
        y: P | None,
        conv: P | None,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        finalize: bool = True,
    ) -> tuple[P, list[int]]:
        o = self.create(kind)
        base = OP_BASE[kind]
        sts = [self.set_desc(o, base + k, d) for k, d in ((4, x), (3, w), (5, y), (2, conv)) if d is not None]
        sts.append(self.set(o, base, T_FLOAT, 1, ctypes.byref(ctypes.c_float(alpha))))
        sts.append(self.set(o, base + 1, T_FLOAT, 1, ctypes.byref(ctypes.c_float(beta))))
        if finalize:
            sts.append(self.finalize(o))
        return o, sts

    def pointwise(self, mode: int, prec: int = FLOAT) -> P:
        p = self.create(POINTWISE)
        assert self.set(p, A_PW_MODE, T_PW_MODE, 1, ctypes.byref(ctypes.c_int(mode))) == 0
        assert self.set(p, A_PW_PREC, T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(prec))) == 0
        assert self.finalize(p) == 0
        return p

    def pw_op(self, pw: P, x: P | None, y: P | None, b: P | None = None, *, finalize: bool = True) -> tuple[P, int]:
        o = self.create(OP_POINTWISE)
        self.set_desc(o, A_PWOP_DESC, pw)
        for name, d in ((A_PWOP_X, x), (A_PWOP_B, b), (A_PWOP_Y, y)):
            if d is not None:
                self.set_desc(o, name, d)
        return o, self.finalize(o) if finalize else 0

    def graph(self, ops: Sequence[P], handle: int | None = None) -> tuple[P, list[int]]:
        g = self.create(OPGRAPH)
        sts = []
        if handle is not None:
            sts.append(self.set(g, A_GRAPH_HANDLE, T_HANDLE, 1, ctypes.byref(P(handle))))
        sts.append(self.set_desc(g, A_GRAPH_OPS, *ops))
        sts.append(self.finalize(g))
        return g, sts

    def engine(self, graph: P, index: int) -> tuple[P, int]:
        e = self.create(ENGINE)
        assert self.set_desc(e, A_ENGINE_GRAPH, graph) == 0
        assert self.set(e, A_ENGINE_INDEX, T_INT64, 1, i64s(index)) == 0
        return e, self.finalize(e)


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
        fused: tuple[npt.NDArray[Any], npt.NDArray[Any], float] | None = None,
        virtual_dtype: int = FLOAT,
    ) -> Outcome:
        """Build op's graph on these arrays (x/dx, w/dw, y/dy: logical NCHW views of any strides) and run it
        in place. ``fused=(z, bias, z_alpha)`` builds conv + add + bias + relu (forward, y the output)."""
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
        s.engine, s.heur_mode, s.heur_rank, s.execute = engine, heur_mode, heur_rank, int(execute)
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
        )
