"""Run in a fresh process by test_graph_record.py: build backend (graph-API) descriptors the way
cudnn_frontend does for a convolution, once straight on the real libcudnn.so.9 and once through the preload
library's hooks, and report every status, the shim's record count and its counters. Prints JSON.
Usage: python -m tests.realcudnn.graph_probe REAL_LIBCUDNN LIBUCUDNN."""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

from tests.realcudnn._sequence import build

real = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
shim = ctypes.CDLL(sys.argv[2])
shim.ucudnn_debug_graph_records.restype = ctypes.c_size_t
shim.ucudnn_stats_json.restype = ctypes.c_size_t


def stats() -> dict[str, Any]:
    buf = ctypes.create_string_buffer(8192)
    shim.ucudnn_stats_json(buf, len(buf))
    result: dict[str, Any] = json.loads(buf.value.decode())
    return result


direct, made_direct = build(real)
for d in made_direct:
    real.cudnnBackendDestroyDescriptor(d)
hooked, made_hooked = build(shim)
recorded_live = int(shim.ucudnn_debug_graph_records())
for d in made_hooked:
    shim.cudnnBackendDestroyDescriptor(d)
print(
    json.dumps(
        {
            "direct": direct,
            "hooked": hooked,
            "created": len(made_hooked),
            "recorded_live": recorded_live,
            "recorded_after_destroy": int(shim.ucudnn_debug_graph_records()),
            "stats": stats(),
        }
    )
)
