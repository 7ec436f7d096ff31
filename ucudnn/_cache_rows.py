"""The cache's records and the checks on what goes into it: plan keys and benchmark rows, the validation of
stored plans and of ``export()`` files (``import_data`` checks a whole file before writing any of it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ucudnn import config
from ucudnn.optimizer import AlgoPerf, candidate_batch_sizes, parse_policy

# The SQLite schema (PRAGMA user_version) and the version of export() files.
SCHEMA_VERSION = 1
EXPORT_FORMAT = "ucudnn-cache"
_SQLITE_INT_MAX = 2**63 - 1
_KNOWN_POLICIES = config.BY_NAME["UCUDNN_BATCH_SIZE_POLICY"].choices


# A stored benchmark row's status for an Unallocated algorithm. A run holding one is complete only for workspace
# limits below what that algorithm needs (see Cache.get_benchmarks).
UNALLOCATED = -2


class CacheError(ValueError):
    """Bad input to the cache (an invalid import file, a bad argument); the message says what and where."""


@dataclass(frozen=True)
class Unallocated(AlgoPerf):
    """An algorithm a benchmark could not give memory to -- its workspace beside the search's own tensors, or more
    than the workspace a ``Find*Ex`` offered: not measured (``time_ms`` is ``inf``), unlike an algorithm that cannot
    run at all; ``workspace_bytes`` is what it needs."""


@dataclass(frozen=True)
class BenchmarkRow:
    """One algorithm measured at one micro-batch size, as stored. ``status`` is the backend's status for this
    algorithm (0: it ran); ``time_ms`` is ``inf`` for an algorithm that could not run."""

    batch: int
    algo: int
    status: int
    time_ms: float
    workspace_bytes: int
    deterministic: bool
    math_type: int

    @classmethod
    def from_perf(cls, perf: AlgoPerf) -> BenchmarkRow:
        """The row stored for ``perf``: status 0 for a time, ``UNALLOCATED`` for an ``Unallocated`` algorithm, -1
        for one that could not run."""
        ok = math.isfinite(perf.time_ms) and perf.time_ms >= 0
        return cls(
            perf.batch,
            perf.algo,
            0 if ok else UNALLOCATED if isinstance(perf, Unallocated) else -1,
            perf.time_ms if ok else math.inf,
            perf.workspace_bytes,
            perf.deterministic,
            perf.math_type,
        )

    @property
    def usable(self) -> bool:
        return self.status == 0 and math.isfinite(self.time_ms)

    def to_perf(self) -> AlgoPerf:
        return AlgoPerf(
            self.batch,
            self.algo,
            self.time_ms if self.usable else math.inf,
            self.workspace_bytes,
            self.deterministic,
            self.math_type,
        )


@dataclass(frozen=True)
class PlanKey:
    """Everything a stored plan depends on besides the benchmark rows it was computed from."""

    key: str
    backend_id: str
    batch: int
    policy: str
    workspace_limit_bytes: int
    deterministic_only: bool

    def params(self) -> tuple[str, str, int, str, int, int]:
        return (
            self.key,
            self.backend_id,
            self.batch,
            canonical_policy(self.policy),
            # SQLite integers are signed 64-bit; the shim may pass SIZE_MAX for "no limit", the same thing here.
            min(self.workspace_limit_bytes, _SQLITE_INT_MAX),
            int(self.deterministic_only),
        )


Steps = tuple[tuple[int, int, int], ...]  # (batch, algo, math_type) per micro-batch, in order


@dataclass(frozen=True)
class Verdict:
    """A micro-batched plan checked on real executions against the undivided choice for the same workspace
    (``plan_key.workspace_limit_bytes`` is that workspace). Times are measured medians per execution, in ms."""

    plan_key: PlanKey
    plan: Steps
    undivided: Steps
    kept: bool
    plan_ms: float
    undivided_ms: float
    samples: int


def steps_json(steps: Sequence[tuple[int, int, int]]) -> str:
    """The canonical text of a plan's steps, as the plans and verdicts tables store it."""
    return json.dumps([list(step) for step in steps])


def canonical_policy(name: str) -> str:
    try:
        return str(parse_policy(name).value)
    except (ValueError, TypeError) as exc:
        raise CacheError(str(exc)) from None


def check_key(key: object, backend_id: object) -> None:
    if not isinstance(key, str) or not key:
        raise CacheError(f"kernel key must be a non-empty str, not {key!r}")
    if not isinstance(backend_id, str):
        raise CacheError(f"backend id must be a str, not {backend_id!r}")


def check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CacheError(f"{name} must be a positive int, not {value!r}")


def is_int(value: object, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= _SQLITE_INT_MAX


def is_time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def loads_or_raw(text: str) -> Any:
    """``text`` parsed as JSON, else ``text`` itself (also for JSON nested too deeply to parse)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return text


def parse_steps(raw: object, batch: int, policy: str, algo_count: int | None) -> list[tuple[int, int, int]]:
    """The micro-batches of a stored plan, checked: [[b, algo, math_type], ...], each b allowed by the policy,
    sizes summing to ``batch``."""
    if not isinstance(raw, list) or not raw:
        raise CacheError("micro_batches must be a non-empty list of [batch, algo, math_type]")
    steps: list[tuple[int, int, int]] = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 3 and is_int(item[0], 1) and all(map(is_int, item[1:]))):
            raise CacheError(f"micro-batch {item!r} is not [batch >= 1, algo >= 0, math_type >= 0]")
        steps.append((item[0], item[1], item[2]))
    total = sum(b for b, _, _ in steps)
    if total != batch:
        raise CacheError(f"micro-batch sizes sum to {total}, not N={batch}")
    if policy not in _KNOWN_POLICIES:
        raise CacheError(f"unknown policy {policy!r} (expected one of {', '.join(_KNOWN_POLICIES)})")
    allowed = set(candidate_batch_sizes(batch, policy))
    if any(b not in allowed for b, _, _ in steps):
        raise CacheError(f"micro-batch sizes {[b for b, _, _ in steps]} are not allowed by policy {policy}")
    if algo_count is not None and any(a >= algo_count for _, a, _ in steps):
        raise CacheError(f"an algorithm is out of range 0..{algo_count - 1}")
    return steps


def validate_plan_row(
    pk: PlanKey, plan_json: object, time_ms: object, workspace_bytes: object, algo_count: int | None
) -> list[tuple[int, int, int]]:
    try:
        raw = json.loads(plan_json) if isinstance(plan_json, str) else None
    except (ValueError, RecursionError):
        raw = None
    if raw is None:
        raise CacheError(f"plan_json is not JSON: {plan_json!r:.80}")
    steps = parse_steps(raw, pk.batch, canonical_policy(pk.policy), algo_count)
    if not is_time(time_ms):
        raise CacheError(f"time_ms {time_ms!r} is not a finite non-negative number")
    if not is_int(workspace_bytes) or workspace_bytes > pk.workspace_limit_bytes:  # type: ignore[operator]
        raise CacheError(f"workspace {workspace_bytes!r} B is not within the limit {pk.workspace_limit_bytes} B")
    return steps


def require(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise CacheError(f"{where}: {what}")


def _require_kernel(item: Any, where: str) -> None:
    """An exported run or plan is an object naming its kernel: key, backend and batch."""
    require(isinstance(item, Mapping), where, "must be an object")
    require(isinstance(item.get("key"), str) and bool(item["key"]), where, "'key' must be a non-empty string")
    require(isinstance(item.get("backend_id"), str), where, "'backend_id' must be a string")
    require(is_int(item.get("batch"), 1), where, "'batch' must be a positive integer")


def validate_import(data: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    require(isinstance(data, Mapping), "import", "the top level must be a JSON object")
    require(data.get("format") == EXPORT_FORMAT, "import", f"'format' must be {EXPORT_FORMAT!r}")
    require(data.get("version") == SCHEMA_VERSION, "import", f"'version' must be {SCHEMA_VERSION}")
    runs, plans = data.get("benchmarks", []), data.get("plans", [])
    require(isinstance(runs, list) and isinstance(plans, list), "import", "'benchmarks' and 'plans' must be lists")
    for i, run in enumerate(runs):
        where = f"benchmarks[{i}]"
        _require_kernel(run, where)
        require(is_time(run.get("measured_at")), where, "'measured_at' must be a timestamp")
        algos = run.get("algos")
        require(isinstance(algos, list), where, "'algos' must be a list")
        for j, a in enumerate(algos):
            w = f"{where}.algos[{j}]"
            require(isinstance(a, Mapping), w, "must be an object")
            for field in ("algo", "math_type", "workspace_bytes"):
                require(is_int(a.get(field)), w, f"'{field}' must be a non-negative integer")
            require(is_int(a.get("status"), -(2**31)), w, "'status' must be an integer")
            require(isinstance(a.get("deterministic"), bool), w, "'deterministic' must be true or false")
            t = a.get("time_ms")
            require(t is None if a["status"] != 0 else is_time(t), w, "'time_ms' must be >= 0 (null if failed)")
    for i, p in enumerate(plans):
        where = f"plans[{i}]"
        _require_kernel(p, where)
        require(p.get("policy") in _KNOWN_POLICIES, where, f"'policy' must be one of {', '.join(_KNOWN_POLICIES)}")
        require(is_int(p.get("workspace_limit")), where, "'workspace_limit' must be a non-negative integer")
        require(isinstance(p.get("deterministic_only"), bool), where, "'deterministic_only' must be true or false")
        require(is_time(p.get("created_at")), where, "'created_at' must be a timestamp")
        pk = PlanKey(p["key"], p["backend_id"], p["batch"], p["policy"], p["workspace_limit"], p["deterministic_only"])
        try:
            validate_plan_row(pk, json.dumps(p.get("micro_batches")), p.get("time_ms"), p.get("workspace_bytes"), None)
        except CacheError as exc:
            raise CacheError(f"{where}: {exc}") from None
    return list(runs), list(plans)
