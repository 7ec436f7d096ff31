"""A ctypes binding of the cuDNN graph (backend) API: the six ``cudnnBackend*`` calls, the enum values they take,
and builders for the descriptors cudnn_frontend makes for a convolution (tensor, convolution, operation,
pointwise, operation graph, engine), plus ``ConvGraph``: one convolution built, planned and executed the way
cudnn_frontend does it. Works on any library exporting the calls: the real ``libcudnn.so.9``, the host backend,
or the preload library (whose exports are the shim's hooks).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from ucudnn import _abi as H
from ucudnn._cudnn_abi import Op, declare

# Short names of the cuDNN 9 enum values the builders use; the values are cudnn_graph_abi.h's (through the generated
# ucudnn._abi), which tests/host/test_graph_abi.py checks against the nvidia-cudnn wheel's cudnn_graph.h.
POINTWISE = H.CUDNN_BACKEND_POINTWISE_DESCRIPTOR
CONVOLUTION = H.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR
ENGINE = H.CUDNN_BACKEND_ENGINE_DESCRIPTOR
ENGINECFG = H.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR
ENGINEHEUR = H.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR
PLAN = H.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
KNOB_CHOICE = H.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR
KNOB_INFO = H.CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR
OP_FWD = H.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
OP_BWD_FILTER = H.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR
OP_BWD_DATA = H.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
OP_POINTWISE = H.CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR
OPGRAPH = H.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
VARIANT_PACK = H.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
TENSOR = H.CUDNN_BACKEND_TENSOR_DESCRIPTOR
T_HANDLE = H.CUDNN_TYPE_HANDLE
T_DATA_TYPE = H.CUDNN_TYPE_DATA_TYPE
T_BOOLEAN = H.CUDNN_TYPE_BOOLEAN
T_INT64 = H.CUDNN_TYPE_INT64
T_FLOAT = H.CUDNN_TYPE_FLOAT
T_DOUBLE = H.CUDNN_TYPE_DOUBLE
T_VOID_PTR = H.CUDNN_TYPE_VOID_PTR
T_CONV_MODE = H.CUDNN_TYPE_CONVOLUTION_MODE
T_HEUR_MODE = H.CUDNN_TYPE_HEUR_MODE
T_NOTE = H.CUDNN_TYPE_NUMERICAL_NOTE
T_KNOB_TYPE = H.CUDNN_TYPE_KNOB_TYPE
T_PW_MODE = H.CUDNN_TYPE_POINTWISE_MODE
T_DESC = H.CUDNN_TYPE_BACKEND_DESCRIPTOR
T_INT32 = H.CUDNN_TYPE_INT32
A_PW_MODE = H.CUDNN_ATTR_POINTWISE_MODE
A_PW_PREC = H.CUDNN_ATTR_POINTWISE_MATH_PREC
A_CONV_COMP = H.CUDNN_ATTR_CONVOLUTION_COMP_TYPE
A_CONV_MODE = H.CUDNN_ATTR_CONVOLUTION_CONV_MODE
A_CONV_DIL = H.CUDNN_ATTR_CONVOLUTION_DILATIONS
A_CONV_STRIDES = H.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES
A_CONV_POST = H.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS
A_CONV_PRE = H.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS
A_CONV_NSP = H.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS
A_HEUR_MODE = H.CUDNN_ATTR_ENGINEHEUR_MODE
A_HEUR_GRAPH = H.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH
A_HEUR_RESULTS = H.CUDNN_ATTR_ENGINEHEUR_RESULTS
A_CFG_ENGINE = H.CUDNN_ATTR_ENGINECFG_ENGINE
A_CFG_KNOBS = H.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES
A_KNOB_TYPE = H.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE
A_KNOB_VALUE = H.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE
A_CFG_WS = H.CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE
A_PLAN_HANDLE = H.CUDNN_ATTR_EXECUTION_PLAN_HANDLE
A_PLAN_CFG = H.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG
A_PLAN_WS = H.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE
# A convolution operation's attributes are alpha, beta, conv, then its three tensors, from these bases on:
A_FWD = H.CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA  # +1 beta, +2 conv, +3 W, +4 X, +5 Y
A_BWD_DATA = H.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA
A_BWD_FILTER = H.CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA
A_PWOP_DESC = H.CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR
A_PWOP_X = H.CUDNN_ATTR_OPERATION_POINTWISE_XDESC
A_PWOP_B = H.CUDNN_ATTR_OPERATION_POINTWISE_BDESC
A_PWOP_Y = H.CUDNN_ATTR_OPERATION_POINTWISE_YDESC
A_PWOP_ALPHA1 = H.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1
A_PWOP_ALPHA2 = H.CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2
A_GRAPH_HANDLE = H.CUDNN_ATTR_OPERATIONGRAPH_HANDLE
A_GRAPH_OPS = H.CUDNN_ATTR_OPERATIONGRAPH_OPS
A_GRAPH_COUNT = H.CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT
A_T_ALIGN = H.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT
A_T_DTYPE = H.CUDNN_ATTR_TENSOR_DATA_TYPE
A_T_DIMS = H.CUDNN_ATTR_TENSOR_DIMENSIONS
A_T_STRIDES = H.CUDNN_ATTR_TENSOR_STRIDES
A_T_VCOUNT = H.CUDNN_ATTR_TENSOR_VECTOR_COUNT
A_T_VDIM = H.CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION
A_T_UID = H.CUDNN_ATTR_TENSOR_UNIQUE_ID
A_T_VIRTUAL = H.CUDNN_ATTR_TENSOR_IS_VIRTUAL
A_VP_UIDS = H.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS
A_VP_PTRS = H.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS
A_VP_INTERMEDIATES = H.CUDNN_ATTR_VARIANT_PACK_INTERMEDIATES
A_VP_WS = H.CUDNN_ATTR_VARIANT_PACK_WORKSPACE
A_ENGINE_GRAPH = H.CUDNN_ATTR_ENGINE_OPERATION_GRAPH
A_ENGINE_INDEX = H.CUDNN_ATTR_ENGINE_GLOBAL_INDEX
A_ENGINE_KNOBS = H.CUDNN_ATTR_ENGINE_KNOB_INFO
A_ENGINE_NOTES = H.CUDNN_ATTR_ENGINE_NUMERICAL_NOTE
NOTE_NONDETERMINISTIC = H.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
NOTE_REDUCED_PRECISION = H.CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION
NOTE_WINOGRAD = H.CUDNN_NUMERICAL_NOTE_WINOGRAD
NOTE_FFT = H.CUDNN_NUMERICAL_NOTE_FFT
NOTE_DOWN_CONVERT = H.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS
PW_ADD = H.CUDNN_POINTWISE_ADD
PW_MUL = H.CUDNN_POINTWISE_MUL
PW_IDENTITY = H.CUDNN_POINTWISE_IDENTITY
PW_RELU = H.CUDNN_POINTWISE_RELU_FWD
HEUR_INSTANT = H.CUDNN_HEUR_MODE_INSTANT
HEUR_FALLBACK = H.CUDNN_HEUR_MODE_FALLBACK
HEUR_A = H.CUDNN_HEUR_MODE_A
FLOAT = H.CUDNN_DATA_FLOAT
DOUBLE = H.CUDNN_DATA_DOUBLE
HALF = H.CUDNN_DATA_HALF
BFLOAT16 = H.CUDNN_DATA_BFLOAT16
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


class GraphApiError(RuntimeError):
    """A backend call that had to succeed did not; ``status`` is its cuDNN status."""

    def __init__(self, what: str, status: int) -> None:
        super().__init__(f"{what}: cuDNN status {status}")
        self.status = status


def _ok(what: str, status: int) -> None:
    if status != 0:
        raise GraphApiError(what, status)


# The six calls a convolution graph takes, as cudnn_frontend makes them.
_BOUND = (
    "cudnnBackendCreateDescriptor",
    "cudnnBackendDestroyDescriptor",
    "cudnnBackendFinalize",
    "cudnnBackendSetAttribute",
    "cudnnBackendGetAttribute",
    "cudnnBackendExecute",
)


class Backend:
    """The backend calls of one library (the real cuDNN, the host backend, or the preload library's hooks),
    statuses as plain ints; descriptors are ``ctypes.c_void_p``. Descriptors made by ``create`` are owned by this
    object until ``destroy_all``."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        for name in _BOUND:
            declare(lib, name)  # on lib's own function objects: callers use lib.cudnnBackend*(...) as well
        self.made: list[P] = []

    def create_status(self, kind: int) -> tuple[int, P]:
        d = P()
        return int(self.lib.cudnnBackendCreateDescriptor(kind, ctypes.byref(d))), d

    def create(self, kind: int) -> P:
        st, d = self.create_status(kind)
        _ok(f"cudnnBackendCreateDescriptor({kind})", st)
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
        return self._set_all(t, steps, skip, finalize)

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
        return self._set_all(c, steps, skip, finalize)

    def _set_all(
        self, d: P, steps: Sequence[tuple[int, int, int, Any]], skip: Sequence[int], finalize: bool
    ) -> tuple[P, list[int]]:
        """Set each (attribute, type, count, elements) of ``steps`` not in ``skip``, then finalize if asked: ``d``
        and every status."""
        sts = [self.set(d, name, ty, count, elems) for name, ty, count, elems in steps if name not in skip]
        if finalize:
            sts.append(self.finalize(d))
        return d, sts

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
        _ok("pointwise mode", self.set(p, A_PW_MODE, T_PW_MODE, 1, ctypes.byref(ctypes.c_int(mode))))
        _ok("pointwise precision", self.set(p, A_PW_PREC, T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(prec))))
        _ok("pointwise finalize", self.finalize(p))
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
        _ok("engine graph", self.set_desc(e, A_ENGINE_GRAPH, graph))
        _ok("engine index", self.set(e, A_ENGINE_INDEX, T_INT64, 1, i64s(index)))
        return e, self.finalize(e)


# Convolution ops by the names ucudnn-bench uses, and the uids PyTorch gives a convolution's tensors.
CONV_OPS = {op.label: int(op) for op in Op}
UID_X, UID_W, UID_Y = 120, 119, 121


def conv_graph(
    builder: Backend,
    handle: int,
    op: str,
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    y_shape: Sequence[int],
    pad: Sequence[int],
    stride: Sequence[int],
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> P:
    """The finalized operation graph of one 2-D convolution ``op`` (see ConvGraph), its descriptors ``builder``'s;
    GraphApiError names the step the backend refused."""
    x, st_x = builder.tensor(UID_X, x_shape)
    w, st_w = builder.tensor(UID_W, w_shape)
    y, st_y = builder.tensor(UID_Y, y_shape)
    conv, st_c = builder.conv(2, pad=pad, stride=stride)
    for what, sts in (("tensor x", st_x), ("tensor w", st_w), ("tensor y", st_y), ("convolution", st_c)):
        for st in sts:
            _ok(what, st)
    kind = OP_KIND[CONV_OPS[op]]
    operation, sts = builder.conv_op(kind, x, w, y, conv, alpha=alpha, beta=beta)
    for st in sts:
        _ok("operation", st)
    graph, sts = builder.graph([operation], handle)
    for st in sts:
        _ok("operation graph", st)
    return graph


class ConvGraph:
    """One 2-D cross-correlation on packed NCHW float32 tensors, planned the way cudnn_frontend plans it.

    Tensors (PyTorch's uids, 16-byte alignment), convolution, the op's operation, the operation graph, the engine
    of global index ``engine``, its configuration, the plan; then the descriptors the plan was built from are
    destroyed, as cudnn_frontend does. ``workspace_bytes`` is the plan's own answer -- through the preload library,
    the micro-batched plan's when the shim split it. The caller owns the plan until ``close``.
    """

    def __init__(
        self,
        api: Backend,
        handle: int,
        op: str,
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        y_shape: Sequence[int],
        pad: Sequence[int],
        stride: Sequence[int],
        engine: int,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
    ) -> None:
        self.api, self.handle = api, handle
        self._packs: list[P] = []
        builder = Backend(api.lib)  # its descriptors die with the plan's construction
        try:
            graph = conv_graph(builder, handle, op, x_shape, w_shape, y_shape, pad, stride, alpha=alpha, beta=beta)
            eng, st = builder.engine(graph, engine)
            _ok(f"engine {engine}", st)
            cfg = builder.create(ENGINECFG)
            _ok("engine configuration", builder.set_desc(cfg, A_CFG_ENGINE, eng))
            _ok("engine configuration finalize", builder.finalize(cfg))
            st, plan = api.create_status(PLAN)
            _ok("plan", st)
            self.plan = plan
            try:
                _ok("plan handle", api.set(plan, A_PLAN_HANDLE, T_HANDLE, 1, ctypes.byref(P(handle))))
                _ok("plan configuration", api.set_desc(plan, A_PLAN_CFG, cfg))
                _ok("plan finalize", api.finalize(plan))
                st, ws = api.get_int64(plan, A_PLAN_WS)
                _ok("plan workspace size", st)
            except GraphApiError:
                api.lib.cudnnBackendDestroyDescriptor(plan)
                raise
            self.workspace_bytes = ws
        finally:
            builder.destroy_all()

    def executor(self, x: int, w: int, y: int, workspace: int) -> Any:
        """A call that executes the plan on these device pointers (x/dx, w/dw, y/dy) with a variant pack built
        once; it raises GraphApiError on a failed execution."""
        api = self.api
        st, vp = api.create_status(VARIANT_PACK)
        _ok("variant pack", st)
        self._packs.append(vp)
        uids = i64s(UID_X, UID_W, UID_Y)
        ptrs = (P * 3)(x, w, y)
        _ok("variant pack uids", api.set(vp, A_VP_UIDS, T_INT64, 3, uids))
        _ok("variant pack pointers", api.set(vp, A_VP_PTRS, T_VOID_PTR, 3, ptrs))
        _ok("variant pack workspace", api.set(vp, A_VP_WS, T_VOID_PTR, 1, ctypes.byref(P(workspace or None))))
        _ok("variant pack finalize", api.finalize(vp))
        execute, handle, plan = api.lib.cudnnBackendExecute, P(self.handle), self.plan

        def call() -> None:
            status = execute(handle, plan, vp)
            if status != 0:
                raise GraphApiError("cudnnBackendExecute", int(status))

        return call

    def close(self) -> None:
        for d in (*self._packs, self.plan):
            self.api.lib.cudnnBackendDestroyDescriptor(d)
        self._packs.clear()
