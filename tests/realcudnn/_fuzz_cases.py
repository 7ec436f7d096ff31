"""Random descriptor sequences for fuzz_probe.py, reproducible from a seed: a well-formed tensor, convolution,
pointwise descriptor or convolution/pointwise operation as cudnn_frontend builds it (an operation sometimes then
made the one operation of a graph), then a few mutations (an
attribute dropped, set twice, with another type, another count or other values, a foreign attribute, a part of the
same kind swapped in or missing), Finalize, sometimes a Set or Finalize after it, and reads back.

What crashes the real library (cuDNN 9.28) is left out, as it is no status to compare: an unknown data type (accepted
at Set, then an illegal instruction in Finalize) and a descriptor of another kind than the attribute takes (a
convolution as an operation's tensor: std::bad_alloc in Finalize).
"""

from __future__ import annotations

import math
import random
from typing import Any

from ucudnn import _abi as H
from ucudnn.graph_api import packed_strides

TENSOR = H.CUDNN_BACKEND_TENSOR_DESCRIPTOR
CONV = H.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR
PW = H.CUDNN_BACKEND_POINTWISE_DESCRIPTOR
OP_FWD = H.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
OP_BWD_DATA = H.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
OP_BWD_FILTER = H.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR
OP_PW = H.CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR
OPGRAPH = H.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR

DATA_TYPE, BOOLEAN, INT64, FLOAT, DOUBLE = 1, 2, 3, 4, 5
CONV_MODE, NAN_PROP, PW_MODE, DESC = 7, 10, 14, 15
TYPES = [DATA_TYPE, BOOLEAN, INT64, FLOAT, DOUBLE, CONV_MODE, NAN_PROP, PW_MODE]

# Attributes by descriptor kind, with the type cudnn_frontend sets them with.
ATTRS: dict[int, dict[int, int]] = {
    TENSOR: {900: INT64, 901: DATA_TYPE, 902: INT64, 903: INT64, 904: INT64, 905: INT64, 906: INT64, 907: BOOLEAN,
             908: BOOLEAN},
    CONV: {100: DATA_TYPE, 101: CONV_MODE, 102: INT64, 103: INT64, 104: INT64, 105: INT64, 106: INT64},
    PW: {0: PW_MODE, 1: DATA_TYPE, 2: NAN_PROP, 3: DOUBLE, 4: DOUBLE, 5: DOUBLE, 6: DOUBLE, 7: DOUBLE, 8: DOUBLE,
         9: INT64},
    OP_FWD: {700: FLOAT, 701: FLOAT, 702: DESC, 703: DESC, 704: DESC, 705: DESC},
    OP_BWD_DATA: {706: FLOAT, 707: FLOAT, 708: DESC, 709: DESC, 710: DESC, 711: DESC},
    OP_BWD_FILTER: {712: FLOAT, 713: FLOAT, 714: DESC, 715: DESC, 716: DESC, 717: DESC},
    OP_PW: {750: DESC, 751: DESC, 752: DESC, 753: DESC, 754: FLOAT, 755: FLOAT},
}  # fmt: skip
Case = dict[str, Any]


def value(typ: int, r: random.Random) -> Any:
    if typ in (FLOAT, DOUBLE):
        return r.choice([0.0, 1.0, -1.0, 0.5, 1e30])
    if typ == BOOLEAN:
        return r.choice([0, 1])
    if typ == INT64:
        return r.choice([-1, 0, 1, 2, 3, 4, 8, 16, 1 << 40])
    if typ == DATA_TYPE:
        return r.choice([0, 1, 2, 3, 9])  # FLOAT, DOUBLE, HALF, INT8, BFLOAT16
    if typ in (CONV_MODE, NAN_PROP):
        return r.choice([0, 1])
    return r.choice([0, 1, 100])  # ADD, MUL, RELU_FWD


def tensor(dims: list[int], uid: int, dtype: int = 0) -> Case:
    steps = [["set", 901, DATA_TYPE, [dtype]], ["set", 902, INT64, dims], ["set", 903, INT64, packed_strides(dims)],
             ["set", 906, INT64, [uid]], ["set", 900, INT64, [16]], ["finalize"]]  # fmt: skip
    return {"kind": TENSOR, "steps": steps}


def convolution(nsp: int, pad: int, stride: int, dil: int) -> Case:
    steps = [["set", 100, DATA_TYPE, [0]], ["set", 101, CONV_MODE, [1]], ["set", 106, INT64, [nsp]],
             ["set", 102, INT64, [dil] * nsp], ["set", 103, INT64, [stride] * nsp],
             ["set", 104, INT64, [pad] * nsp], ["set", 105, INT64, [pad] * nsp], ["finalize"]]  # fmt: skip
    return {"kind": CONV, "steps": steps}


def pointwise(mode: int) -> Case:
    return {"kind": PW, "steps": [["set", 0, PW_MODE, [mode]], ["set", 1, DATA_TYPE, [0]], ["finalize"]]}


def well_formed(kind: int, r: random.Random) -> Case:
    """One descriptor (with its parts) as cudnn_frontend builds it, not yet finalized."""
    if kind == TENSOR:
        case = tensor([r.choice([1, 2, 3, 8, 16]) for _ in range(r.choice([3, 4, 5]))], r.randint(1, 99))
    elif kind == CONV:
        case = convolution(r.choice([1, 2, 3]), 1, 1, 1)
    elif kind == PW:
        case = pointwise(r.choice([0, 1, 100]))
    elif kind == OP_PW:
        dims = [2, 4, 3, 3]
        parts = [pointwise(r.choice([0, 1, 100])), tensor(dims, 1), tensor(dims, 2), tensor(dims, 3)]
        steps = [["set", 750 + i, DESC, [i]] for i in range(4)]  # the pointwise descriptor, X, B, Y
        case = {"kind": OP_PW, "parts": parts, "steps": steps}
    else:
        n, c, k, h = r.choice([1, 2]), r.choice([1, 3, 4]), r.choice([2, 4]), r.choice([5, 8])
        pad, stride, dil, f = r.choice([0, 1]), r.choice([1, 2]), r.choice([1, 2]), r.choice([1, 3])
        p = (h + 2 * pad - dil * (f - 1) - 1) // stride + 1
        x, w, y = tensor([n, c, h, h], 1), tensor([k, c, f, f], 2), tensor([n, k, p, p], 3)
        a = min(ATTRS[kind])
        # after alpha, beta and the convolution, the tensors in the parts w, x, y: forward W X Y, backward data
        # W DX DY, backward filter DW X DY
        steps = [["set", a, FLOAT, [1.0]], ["set", a + 1, FLOAT, [0.0]], ["set", a + 2, DESC, [3]]]
        steps += [["set", a + 3 + i, DESC, [part]] for i, part in enumerate([1, 0, 2])]
        case = {"kind": kind, "parts": [x, w, y, convolution(2, pad, stride, dil)], "steps": steps}
    case["steps"] = [s for s in case["steps"] if s[0] != "finalize"]
    return case


def mutate(kind: int, case: Case, r: random.Random) -> Case:
    steps = [list(s) for s in case["steps"]]
    parts = [dict(p, steps=[list(s) for s in p["steps"]]) for p in case.get("parts", [])]
    for _ in range(r.randint(1, 3)):
        op = r.randrange(9 if parts else 7)
        i = r.randrange(len(steps)) if steps else -1
        if op == 0 and steps:
            steps.pop(i)
        elif op == 1 and steps and steps[i][2] != DESC:
            steps[i][2] = r.choice(TYPES)
            steps[i][3] = [value(steps[i][2], r) for _ in steps[i][3]]
        elif op == 2 and steps and steps[i][2] != DESC:
            steps[i][3] = [value(steps[i][2], r) for _ in range(r.choice([0, 1, 2, 3, 9]))]
        elif op == 3 and steps and steps[i][2] != DESC:
            steps[i][3] = [value(steps[i][2], r) for _ in steps[i][3]]
        elif op == 4:
            name = r.choice([*ATTRS[kind], r.choice([0, 100, 700, 900, 905, 1500, 99999])])
            typ = ATTRS[kind].get(name, r.choice(TYPES))
            if typ == DESC:  # (a part of another kind than the attribute's crashes the real library's Finalize)
                continue
            vals = [value(typ, r) for _ in range(r.choice([1, 2, 4]))]
            steps.insert(r.randrange(len(steps) + 1), ["set", name, typ, vals])
        elif op == 5 and steps:
            steps.insert(r.randrange(len(steps) + 1), list(steps[i]))
        elif op == 6 and steps and steps[i][2] == DESC and steps[i][3][0] >= 0:  # NULL, or a part of the same kind
            kind_of = parts[steps[i][3][0]]["kind"]
            steps[i][3] = [r.choice([-1, *[j for j, p in enumerate(parts) if p["kind"] == kind_of]])]
        elif op == 7 and parts:  # a part's shape or type changed, or a part left unfinalized
            j = r.randrange(len(parts))
            sub = r.choice([s for s in parts[j]["steps"] if s[0] == "set"])
            if sub[2] == INT64 and sub[1] in (902, 104, 105, 103):
                k = r.randrange(len(sub[3]))
                sub[3][k] = max(0, sub[3][k] + r.choice([-1, 1]))
            elif sub[2] == DATA_TYPE:
                sub[3] = [value(DATA_TYPE, r)]
        elif op == 8 and parts:
            j = r.randrange(len(parts))
            parts[j]["steps"] = [s for s in parts[j]["steps"] if s[0] != "finalize"]
    return {**case, "steps": steps, **({"parts": parts} if parts else {})}


def random_case(r: random.Random) -> Case:
    kind = r.choice([TENSOR, CONV, PW, OP_FWD, OP_BWD_DATA, OP_BWD_FILTER, OP_PW])
    case = well_formed(kind, r)
    if r.random() < 0.8:
        case = mutate(kind, case, r)
    steps = [*case["steps"], ["finalize"]]
    if r.random() < 0.3:
        steps += mutate(kind, well_formed(kind, r), r)["steps"][:1]
    if r.random() < 0.3:
        steps.append(["finalize"])
    readable = [n for n, t in ATTRS[kind].items() if t != DESC]
    for _ in range(r.randint(0, 3)):
        name = r.choice(readable)
        typ = ATTRS[kind][name] if r.random() < 0.8 else r.choice(TYPES)
        steps.append(["get", name, typ, r.choice([0, 1, 2, 8])])
    return {**case, "steps": steps}


def in_graph(op: Case, r: random.Random) -> Case:
    """An operation case (its own steps ending in Finalize, or not) as the one operation of a graph, which is then
    finalized: the graph's engine count is a value each library has its own of, so it is not read."""
    parts = [*op.get("parts", []), {"kind": op["kind"], "steps": op["steps"]}]
    steps: list[list[Any]] = [["set", 801, DESC, [len(parts) - 1]], ["finalize"]]
    if r.random() < 0.2:
        steps.insert(0, ["set", 801, DESC, [-1]])
    return {"kind": OPGRAPH, "parts": parts, "steps": steps}


# 64-bit values at and past the limits, for cases only the host backend runs (``extreme``): see EXTREME.
EXTREME_64 = [2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1, -(2**63), -(2**31) - 1]


def _extreme(case: Case, r: random.Random) -> Case:
    """Some of the 64-bit integers set (sizes, strides, paddings, dilations, uids, alignments) made extreme."""

    def steps(ss: list[list[Any]]) -> list[list[Any]]:
        return [[*s[:3], [r.choice(EXTREME_64) if r.random() < 0.4 else v for v in s[3]]]
                if s[0] == "set" and s[2] == INT64 and r.random() < 0.5 else s for s in ss]  # fmt: skip

    parts = [dict(p, steps=steps(p["steps"])) for p in case.get("parts", [])]
    return {**case, "steps": steps(case["steps"]), **({"parts": parts} if parts else {})}


def cases(seed: int, count: int, extreme: bool = False) -> list[Case]:
    r = random.Random(seed)
    out = []
    for _ in range(count):
        case = random_case(r)
        if case["kind"] in (OP_FWD, OP_BWD_DATA, OP_BWD_FILTER, OP_PW) and r.random() < 0.3:
            case = in_graph(case, r)
        out.append(_extreme(case, r) if extreme else case)
    return out


# ---- the legacy API's descriptors (legacy_fuzz_probe.py): one tensor, filter and convolution per case ----


def packed(dims: list[int]) -> list[int]:
    strides = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * max(1, dims[k + 1])
    return strides


# Values at and past the limits of int, for cases only the host backend runs (``extreme``): it must answer them all
# and never overflow itself (a build with -fsanitize=undefined turns an overflow into a failure, docs/testing.md).
EXTREME = [1, 2, 3, 46341, 65536, 2**30, 2**31 - 1, 0, -1, -(2**31)]


def _legacy_dims(r: random.Random, n: int, extreme: bool = False) -> list[int]:
    """Extents whose products stay far below 2**31: beyond, the real library's answers follow 32-bit wraparound
    (cuDNN 9.28 takes [1, 2, 2, 2**30] and refuses [1, 1, 4, 2**30] with NOT_SUPPORTED), which is not emulated.
    ``extreme``: any of EXTREME, mostly positive."""
    if extreme:
        return [r.choice(EXTREME[:7]) if r.random() < 0.9 else r.choice(EXTREME) for _ in range(n)]
    dims = [r.choice([1, 2, 3, 4, 8]) for _ in range(n)]
    if r.random() < 0.3:
        dims[r.randrange(n)] = r.choice([0, -1, 100000])
    if math.prod(max(1, d) for d in dims) > 1 << 26:  # eight dims of up to 8 beside 100000 would pass 2**31
        dims = [min(d, 8) for d in dims]
    return dims


def clamped(values: list[int]) -> list[int]:
    return [max(-(2**31), min(2**31 - 1, v)) for v in values]


def legacy_call(r: random.Random, extreme: bool = False) -> list[Any]:
    """One setter call with plausible, sometimes wrong, arguments; ``extreme``: sizes, strides, paddings,
    dilations and group counts of EXTREME (the host backend's cases only)."""
    if extreme:
        return _extreme_call(r)
    dtype = r.choice([0, 0, 1, 2, 3, 4, 9, 10])
    fmt = r.choice([0, 1, 2])
    nb = r.choice([3, 4, 4, 4, 5, 5, 1, 2, 8, 9])
    kind = r.randrange(10)
    if kind == 0:
        dims = _legacy_dims(r, nb)
        strides = packed(dims)
        if r.random() < 0.3:
            strides[r.randrange(nb)] = r.choice([0, -1, 2, 1000])
        if r.random() < 0.1:
            strides = strides[:-1]
        return ["tensor_nd", dtype, dims, strides]
    if kind == 1:
        # (a 2-D NHWC tensor has no spatial dims, and the real library answers for it with strides it makes up)
        return ["tensor_nd_ex", fmt, dtype, _legacy_dims(r, 3 if fmt == 1 and nb == 2 else nb)]
    if kind == 2:
        return ["tensor_4d", fmt, dtype, *_legacy_dims(r, 4)]
    if kind == 3:
        dims = _legacy_dims(r, 4)
        strides = packed(dims)
        if r.random() < 0.3:
            strides[r.randrange(4)] = r.choice([0, -1, 2, 1000])
        return ["tensor_4d_ex", dtype, *dims, *strides]
    if kind == 4:
        return ["filter_nd", dtype, fmt, _legacy_dims(r, nb)]
    if kind == 5:
        return ["filter_4d", dtype, fmt, *_legacy_dims(r, 4)]
    if kind in (6, 7):
        n = r.choice([1, 2, 2, 2, 3, 0, 4])
        pads = [r.choice([0, 1, 2, -1]) if r.random() < 0.2 else 1 for _ in range(n)]
        # (a zero stride is refused at Set but left written, and the real library's output-dimension query then
        # divides by it: SIGFPE, so it is left out; the host backend refuses that query, test_api_desc.py)
        strides = [r.choice([1, 2, -1]) if r.random() < 0.2 else 1 for _ in range(n)]
        dils = [r.choice([0, 1, 2, -1]) if r.random() < 0.2 else 1 for _ in range(n)]
        mode, comp = r.choice([0, 1, 1, 2]), r.choice([0, 0, 1, 2, 3, 9])
        if kind == 7:
            return ["conv_2d", pads[0] if pads else 0, pads[-1] if pads else 0, *[*strides, 1, 1][:2],
                    *[*dils, 1, 1][:2], mode, comp]  # fmt: skip
        return ["conv_nd", pads, strides, dils, mode, comp]
    if kind == 8:
        return ["groups", r.choice([1, 1, 2, 3, 0, -1])]
    return ["math", r.choice([0, 1, 2, 3, 4])]


def _extreme_call(r: random.Random) -> list[Any]:
    dtype, fmt = r.choice([0, 1, 2, 3, 9]), r.choice([0, 1, 2])
    nb = r.choice([3, 4, 4, 5, 8])
    kind = r.randrange(9)
    dims = _legacy_dims(r, nb, extreme=True)
    if kind == 0:
        strides = clamped(packed(dims)) if r.random() < 0.5 else [r.choice(EXTREME) for _ in range(nb)]
        return ["tensor_nd", dtype, dims, strides]
    if kind == 1:
        return ["tensor_nd_ex", fmt, dtype, dims]
    if kind == 2:
        return ["tensor_4d", fmt, dtype, *dims[:4], *[1] * (4 - len(dims[:4]))]
    if kind == 3:
        d4 = _legacy_dims(r, 4, extreme=True)
        return ["tensor_4d_ex", dtype, *d4, *(clamped(packed(d4)) if r.random() < 0.5 else
                                              [r.choice(EXTREME) for _ in range(4)])]  # fmt: skip
    if kind == 4:
        return ["filter_nd", dtype, fmt, dims]
    if kind == 5:
        return ["filter_4d", dtype, fmt, *_legacy_dims(r, 4, extreme=True)]
    if kind in (6, 7):
        n = r.choice([1, 2, 3])
        pads, strides, dils = ([r.choice(EXTREME) if r.random() < 0.5 else 1 for _ in range(n)] for _ in range(3))
        mode, comp = r.choice([0, 1]), r.choice([0, 1, 2])
        if kind == 7:
            return ["conv_2d", pads[0], pads[-1], strides[0], strides[-1], dils[0], dils[-1], mode, comp]
        return ["conv_nd", pads, strides, dils, mode, comp]
    return ["groups", r.choice(EXTREME)]


def _extreme_problem(r: random.Random) -> list[list[Any]]:
    """A 2-D convolution whose sizes, paddings and filter reach the limits (its tensors still within 2**31
    elements, mostly), so that the workspace and output queries compute with them."""
    n, c = r.choice([1, 2, 3, 65536, 2**20]), r.choice([1, 3, 64, 65536])
    h = r.choice([1, 7, 32, 46341, 2**30])
    while n * c * h * h >= 2**31 and r.random() < 0.9:
        h = max(1, h // 64)
    pad = r.choice([0, 1, 2**15, 2**29, 2**30])
    f = max(1, min(2**31 - 1, r.choice([1, 3, 2**15, h, h + 2 * pad, 2**30 + 1])))
    k, stride, dil = r.choice([1, 8, 65536, 2**31 - 1]), r.choice([1, 2, 2**30]), r.choice([1, 1, 2, 2**20])
    x = [n, c, h, h]
    return [["tensor_nd", r.choice([0, 0, 1, 2]), x, clamped(packed(x))], ["filter_nd", 0, 0, [k, c, f, f]],
            ["conv_nd", [pad, pad], [stride, stride], [dil, dil], 1, 0]]  # fmt: skip


def legacy_cases(seed: int, count: int, extreme: bool = False) -> list[list[list[Any]]]:
    """Well-formed descriptors of a 2-D or 3-D convolution most of the time, then random setter calls, with
    reads between and at the end. ``extreme``: the setter calls take values of EXTREME."""
    r = random.Random(seed)
    out = []
    for _ in range(count):
        nsp = r.choice([2, 2, 3])
        x = [2, 4, *[8] * nsp]
        calls: list[list[Any]] = []
        if extreme and r.random() < 0.5:
            out.append([*_extreme_problem(r), ["read"], ["sizes"], ["queries"]])
            continue
        if r.random() < 0.8:
            calls += [["tensor_nd", 0, x, packed(x)], ["filter_nd", 0, 0, [6, 4, *[3] * nsp]],
                      ["conv_nd", [1] * nsp, [1] * nsp, [1] * nsp, 1, 0]]  # fmt: skip
        for _ in range(r.randint(1, 4)):
            calls.append(legacy_call(r, extreme))
            if r.random() < 0.3:
                calls.append(["read"])
        calls += [["read"], ["sizes"], *([["queries"]] if extreme else [])]
        out.append(calls)
    return out
