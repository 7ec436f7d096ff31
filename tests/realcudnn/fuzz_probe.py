"""Run in a fresh process by test_fuzz_parity.py: random descriptor sequences (read as JSON from stdin), each call's
status and each read-back value recorded, against whatever library the process resolves cuDNN's symbols from.
Usage: python -m tests.realcudnn.fuzz_probe LIBCUDNN.

A case is {"kind": descriptor type, "steps": [...], "parts": [cases]}: each part (a case itself, without parts)
is built first, then the case's own descriptor; all are destroyed last. A step is one of ["set", name, type,
[values]], ["finalize"], ["get", name, type, requested]. Values are passed in an array of the type's C size; for
CUDNN_TYPE_BACKEND_DESCRIPTOR they are indices into the parts (-1: NULL). A get reads into `requested` slots (NULL
for 0: a count query); a descriptor-valued get is never asked (it fills caller-made descriptors). No other
pointer-valued type is used: the real library would follow it. Prints one JSON list per case: per part and then
for the case itself, the create status and per step its status (a get that succeeded: also the count and values).
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(None)
lib.cudnnBackendSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p]
lib.cudnnBackendGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                         ctypes.c_void_p, ctypes.c_void_p]  # fmt: skip

DESC = 15  # CUDNN_TYPE_BACKEND_DESCRIPTOR
# cudnnBackendAttributeType_t -> the C type of one element
CTYPES: dict[int, Any] = {1: ctypes.c_int, 2: ctypes.c_bool, 3: ctypes.c_int64, 4: ctypes.c_float,
                          5: ctypes.c_double, 7: ctypes.c_int, 10: ctypes.c_int, 14: ctypes.c_int}  # fmt: skip


def build(case: dict[str, Any], parts: list[ctypes.c_void_p]) -> tuple[ctypes.c_void_p, list[Any]]:
    d = ctypes.c_void_p()
    out: list[Any] = [lib.cudnnBackendCreateDescriptor(case["kind"], ctypes.byref(d))]
    for step in case["steps"]:
        if step[0] == "set":
            _, name, typ, values = step
            if typ == DESC:
                arr: Any = (ctypes.c_void_p * max(1, len(values)))(
                    *[parts[i].value if i >= 0 else None for i in values]
                )
            else:
                arr = (CTYPES[typ] * max(1, len(values)))(*values)
            out.append(lib.cudnnBackendSetAttribute(d, name, typ, len(values), ctypes.cast(arr, ctypes.c_void_p)))
        elif step[0] == "finalize":
            out.append(lib.cudnnBackendFinalize(d))
        else:
            _, name, typ, requested = step
            ctype = CTYPES[typ]
            buf = (ctype * max(1, requested))() if requested else None
            ptr = ctypes.cast(buf, ctypes.c_void_p) if buf is not None else None
            n = ctypes.c_int64(-7)
            st = lib.cudnnBackendGetAttribute(d, name, typ, requested, ctypes.byref(n), ptr)
            read: list[Any] = []
            if st == 0 and buf is not None:
                read = [float(v) if typ in (4, 5) else int(v) for v in buf[: max(0, min(n.value, requested))]]
            out.append([st, n.value if st == 0 else None, read])
    return d, out


def run(case: dict[str, Any]) -> list[Any]:
    parts: list[ctypes.c_void_p] = []
    out: list[Any] = []
    for part in case.get("parts", []):
        d, statuses = build(part, parts)
        parts.append(d)
        out.append(statuses)
    d, statuses = build(case, parts)
    out.append(statuses)
    for made in [d, *reversed(parts)]:
        lib.cudnnBackendDestroyDescriptor(made)
    return out


for case in json.load(sys.stdin):
    print(json.dumps(run(case)), flush=True)
