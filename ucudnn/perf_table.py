"""Recorded performance tables: a JSON file of measured algorithms per kernel, turned into ``AlgoPerf`` lists.

Format::

    {"kernels": [{"name": "conv2.fwd", "batch": 256,
                  "measurements": [{"batch": 32, "algo": 1, "time_ms": 0.52, "workspace_bytes": 1048576,
                                    "determinism": true, "math_type": 0}, ...]}, ...]}

``determinism`` (alias ``deterministic``, default true) and ``math_type`` (default 0) are optional; unknown keys
are ignored. Every problem raises ``PerfTableError`` whose message starts with the JSON path of the bad value,
e.g. ``kernels[1].measurements[3].time_ms: negative (-2.0)``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ucudnn._cache_rows import UNALLOCATED
from ucudnn.log import get_logger
from ucudnn.optimizer import AlgoPerf, BatchSizePolicy, can_compose, candidate_batch_sizes, parse_policy
from ucudnn.plan_text import short_kernel_name


class PerfTableError(ValueError):
    """A malformed performance table; the message names the offending field."""


@dataclass(frozen=True)
class KernelTable:
    """One kernel's measurements; ``batch`` is its mini-batch size."""

    name: str
    batch: int
    perfs: tuple[AlgoPerf, ...]

    def measured_sizes(self) -> frozenset[int]:
        return frozenset(p.batch for p in self.perfs)


def _typename(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _int(obj: Mapping[str, object], key: str, where: str, *, minimum: int) -> int:
    if key not in obj:
        raise PerfTableError(f"{where}.{key}: missing")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise PerfTableError(f"{where}.{key}: expected an integer, got {_typename(value)} ({value!r})")
    if value < minimum:
        what = "negative" if value < 0 else f"must be >= {minimum}"
        raise PerfTableError(f"{where}.{key}: {what} ({value})")
    return value


def _measurement(obj: object, where: str) -> AlgoPerf:
    if not isinstance(obj, dict):
        raise PerfTableError(f"{where}: expected an object, got {_typename(obj)}")
    batch = _int(obj, "batch", where, minimum=1)
    algo = _int(obj, "algo", where, minimum=0)
    if "time_ms" not in obj:
        raise PerfTableError(f"{where}.time_ms: missing")
    t = obj["time_ms"]
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise PerfTableError(f"{where}.time_ms: expected a number, got {_typename(t)} ({t!r})")
    if math.isnan(t) or math.isinf(t):
        raise PerfTableError(f"{where}.time_ms: not finite ({t})")
    if t < 0:
        raise PerfTableError(f"{where}.time_ms: negative ({float(t)})")
    workspace = _int(obj, "workspace_bytes", where, minimum=0)
    det_key = "determinism" if "determinism" in obj else "deterministic"
    det = obj.get(det_key, True)
    if not isinstance(det, bool):
        raise PerfTableError(f"{where}.{det_key}: expected true or false, got {_typename(det)} ({det!r})")
    math_type = _int(obj, "math_type", where, minimum=0) if "math_type" in obj else 0
    return AlgoPerf(batch, algo, float(t), workspace, det, math_type)


def parse(doc: object) -> tuple[KernelTable, ...]:
    """Validate a decoded JSON document and return its kernels in file order."""
    if not isinstance(doc, dict):
        raise PerfTableError(f"top level: expected an object with a 'kernels' list, got {_typename(doc)}")
    if "kernels" not in doc:
        raise PerfTableError("kernels: missing")
    kernels = doc["kernels"]
    if not isinstance(kernels, list):
        raise PerfTableError(f"kernels: expected a list, got {_typename(kernels)}")
    if not kernels:
        raise PerfTableError("kernels: empty")
    out: list[KernelTable] = []
    seen: dict[str, int] = {}
    for k, kobj in enumerate(kernels):
        where = f"kernels[{k}]"
        if not isinstance(kobj, dict):
            raise PerfTableError(f"{where}: expected an object, got {_typename(kobj)}")
        if "name" not in kobj:
            raise PerfTableError(f"{where}.name: missing")
        name = kobj["name"]
        if not isinstance(name, str) or not name:
            raise PerfTableError(f"{where}.name: expected a non-empty string, got {_typename(name)} ({name!r})")
        if name in seen:
            raise PerfTableError(f"{where}.name: duplicate {name!r} (also kernels[{seen[name]}])")
        seen[name] = k
        batch = _int(kobj, "batch", where, minimum=1)
        if "measurements" not in kobj:
            raise PerfTableError(f"{where}.measurements: missing")
        ms = kobj["measurements"]
        if not isinstance(ms, list):
            raise PerfTableError(f"{where}.measurements: expected a list, got {_typename(ms)}")
        if not ms:
            raise PerfTableError(f"{where}.measurements: empty")
        perfs = tuple(_measurement(m, f"{where}.measurements[{i}]") for i, m in enumerate(ms))
        out.append(KernelTable(name, batch, perfs))
    return tuple(out)


def load(path: str | Path) -> tuple[KernelTable, ...]:
    """Read and validate the table at ``path``; unreadable files and bad JSON are PerfTableErrors too."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PerfTableError(f"{path}: cannot read: {reason}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PerfTableError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError:
        raise PerfTableError(f"{path}: nested too deeply to be a performance table") from None
    return parse(doc)


def check_coverage(kernel: KernelTable, batch: int, policy: BatchSizePolicy | str, where: str = "") -> None:
    """Raise PerfTableError unless the measured sizes the policy allows can make up ``batch`` (whatever the
    workspace limit): the table itself is then inadequate, as opposed to the limit being too tight."""
    pol = parse_policy(policy)
    allowed = set(candidate_batch_sizes(batch, pol))
    usable = sorted(kernel.measured_sizes() & allowed)
    if not can_compose(batch, usable):
        label = where or f"kernel {kernel.name!r}"
        raise PerfTableError(
            f"{label}: measured batch sizes {usable} allowed by policy {pol.value} cannot make up batch {batch}"
        )


def describe(kernels: Sequence[KernelTable]) -> list[str]:
    """One line per kernel: its index (what ``--kernel`` takes), short name, batch and measured sizes."""
    lines = []
    for i, k in enumerate(kernels):
        sizes = ",".join(map(str, sorted(k.measured_sizes())))
        lines.append(f"[{i}] {short_kernel_name(k.name, 72)}  (batch {k.batch}, measured at b = {sizes})")
    return lines


def find(kernels: tuple[KernelTable, ...], name: str | None) -> KernelTable:
    """The kernel ``name`` names: its exact name, its index in the table, or a part of exactly one kernel's name;
    the only kernel when ``name`` is None."""
    if name is None:
        if len(kernels) == 1:
            return kernels[0]
        raise PerfTableError(_choose(kernels, f"the table has {len(kernels)} kernels: give --kernel"))
    for k in kernels:
        if k.name == name:
            return k
    if name.isdigit():
        if int(name) < len(kernels):
            return kernels[int(name)]
        raise PerfTableError(f"--kernel {name}: the table has kernels 0 to {len(kernels) - 1}")
    matches = [k for k in kernels if name in k.name or name in short_kernel_name(k.name)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise PerfTableError(_choose(matches, f"--kernel {name!r} matches {len(matches)} kernels", kernels))
    raise PerfTableError(_choose(kernels, f"unknown kernel {name!r}", kernels))


def _choose(kernels: Sequence[KernelTable], problem: str, table: Sequence[KernelTable] = ()) -> str:
    index = {id(k): i for i, k in enumerate(table or kernels)}
    listing = ", ".join(f"[{index[id(k)]}] {short_kernel_name(k.name, 40)}" for k in kernels[:4])
    more = f" and {len(kernels) - 4} more" if len(kernels) > 4 else ""
    return f"{problem} (an index, a unique part of a name, or the name; --list shows all): {listing}{more}"


def from_cache_export(
    export: Mapping[str, Any], *, batch: int | None = None, backend_id: str | None = None
) -> dict[str, Any]:
    """A performance table (the ``ucudnn plan --table`` format) from a ``ucudnn db export`` object.

    One kernel per cached key: its measurements are every successful algorithm at every micro-batch size the
    cache holds; its ``batch`` is ``batch`` if given, else the largest size measured. Measurements of several
    backends (GPUs, library versions) must not be mixed: ``backend_id`` selects one, and is required when the
    export holds more than one. Raises PerfTableError naming what is wrong.
    """
    runs = export.get("benchmarks")
    if not isinstance(runs, list):
        raise PerfTableError("export: no 'benchmarks' list (is this a `ucudnn db export` file?)")
    backends = sorted({str(r.get("backend_id")) for r in runs if isinstance(r, Mapping)})
    if backend_id is None:
        if len(backends) > 1:
            raise PerfTableError(f"export holds several backends; choose one with --backend-id: {', '.join(backends)}")
        backend_id = backends[0] if backends else None
    elif backend_id not in backends:
        raise PerfTableError(f"backend {backend_id!r} not in the export (has: {', '.join(backends) or 'none'})")
    if batch is not None and batch < 1:
        raise PerfTableError(f"batch: must be >= 1 ({batch})")
    kernels: dict[str, list[dict[str, Any]]] = {}
    short: list[str] = []
    for run in runs:
        if not isinstance(run, Mapping) or run.get("backend_id") != backend_id:
            continue
        rows = kernels.setdefault(str(run["key"]), [])
        if any(isinstance(a, Mapping) and a.get("status") == UNALLOCATED for a in run.get("algos", [])):
            short.append(f"{short_kernel_name(str(run['key']))} at b={run['batch']}")
        for a in run.get("algos", []):
            if a.get("status") == 0 and a.get("time_ms") is not None:
                rows.append(
                    {
                        "batch": int(run["batch"]),
                        "algo": int(a["algo"]),
                        "time_ms": float(a["time_ms"]),
                        "workspace_bytes": int(a["workspace_bytes"]),
                        "determinism": bool(a["deterministic"]),
                        "math_type": int(a["math_type"]),
                    }
                )
    if short:
        get_logger("perf_table").warning(
            "%d benchmark run(s) could not allocate memory for some algorithms, which the table lacks (measured "
            "again when a plan could use them): %s",
            len(short),
            ", ".join(short[:8]) + (", ..." if len(short) > 8 else ""),
        )
    table = [
        {"name": key, "batch": batch if batch is not None else max(m["batch"] for m in rows), "measurements": rows}
        for key, rows in sorted(kernels.items())
        if rows
    ]
    return {"kernels": table}
