"""The SQLite cache of benchmark results and plans.

Benchmark rows are keyed by (kernel key, micro-batch size b, backend id). The kernel key excludes N, so every
mini-batch size that considers micro-batches of b samples shares the same rows. Every algorithm measured at b
is stored whatever the workspace limit of the request that measured it, and limits are applied when reading:
a later request with a larger limit sees the faster, hungrier algorithms (the original cached only what fitted).

Plans are keyed by (kernel key, backend id, N, batch-size policy, workspace limit, deterministic_only) in the
``plans`` table, whose layout the C shim may read directly::

    plans(key, backend_id, batch, policy, workspace_limit, deterministic_only,
          plan_json,        -- [[micro-batch size, algo, math type], ...] in execution order
          time_ms, workspace_bytes, created_at)

This module is the tables' API. The file under them (opening, locking, recovery, transactions) is
:mod:`ucudnn._cache_store`: several processes (data-parallel ranks) share one file, a damaged or unusable cache of
ours is renamed aside and a fresh one created, and a file that is not ours (not SQLite at all, or another
application's database) is never touched: the Cache refuses it (CacheError naming it), or, as the planner inside a
program opens it, plans in memory and says why. ``Cache(path, read_only=True)`` (what ``ucudnn db
stats/list/export`` open) changes nothing on disk: no journal switch, no added table, no lock file, nothing moved.
Text that is not UTF-8 (forged rows) is skipped by its reader with a warning.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ucudnn import _cache_claims, config
from ucudnn._cache_claims import Claim, Holder, Outcome
from ucudnn._cache_rows import (
    EXPORT_FORMAT,
    SCHEMA_VERSION,
    UNALLOCATED,
    BenchmarkRow,
    CacheError,
    PlanKey,
    Unallocated,
    Verdict,
    check_key,
    check_positive,
    is_int,
    is_time,
    loads_or_raw,
    parse_steps,
    validate_import,
    validate_plan_row,
)
from ucudnn._cache_rows import steps_json as _steps_json
from ucudnn._cache_schema import APPLICATION_ID, foreign_reason
from ucudnn._cache_store import BUSY_TIMEOUT_S, LOCK_WAIT_S, WAIT_NOTICE_S, Store
from ucudnn.log import get_logger
from ucudnn.optimizer import AlgoPerf, MicroBatch, Plan

__all__ = [
    "APPLICATION_ID",
    "BUSY_TIMEOUT_S",
    "EXPORT_FORMAT",
    "LOCK_WAIT_S",
    "SCHEMA_VERSION",
    "UNALLOCATED",
    "WAIT_NOTICE_S",
    "BenchmarkRow",
    "Cache",
    "CacheError",
    "Claim",
    "Holder",
    "Outcome",
    "PlanKey",
    "Unallocated",
    "Verdict",
    "foreign_reason",
]

log = get_logger("cache")


class Cache:
    """A ucudnn cache file (or, with ``Cache.in_memory()``, a private in-memory one): its tables.

    Thread-safe, through its :class:`~ucudnn._cache_store.Store`. Not to be shared across processes as an object:
    each process opens its own ``Cache`` on the same path.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        memory_fallback: bool = False,
        lock_wait_s: float = LOCK_WAIT_S,
        read_only: bool = False,
    ) -> None:
        where: Path | None = Path(path) if path is not None else config.database_path()
        if str(where) == ":memory:":
            where = None
        self._store = Store(where, memory_fallback=memory_fallback, lock_wait_s=lock_wait_s, read_only=read_only)

    @classmethod
    def in_memory(cls) -> Cache:
        """A private cache that lives as long as the object (for ``Planner(cache=None)`` and tests)."""
        return cls(":memory:")

    @property
    def path(self) -> Path | None:
        """The file (None: in memory)."""
        return self._store.path

    @property
    def moved_aside(self) -> list[tuple[Path, Path]]:
        """Paths this Cache moved aside while opening (for tests and the CLI)."""
        return self._store.moved_aside

    @property
    def memory_only(self) -> str | None:
        """Why this Cache works on a private in-memory copy instead of its file (``memory_fallback`` only)."""
        return self._store.memory_only

    @property
    def read_only(self) -> bool:
        """True when the file is read, never written (asked for, or the file is read-only to this process)."""
        return self._store.read_only

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._store)

    # ---------------------------------------------------------------- benchmark rows

    def put_benchmark(self, key: str, backend_id: str, batch: int, rows: Iterable[AlgoPerf | BenchmarkRow]) -> None:
        """Record one benchmark run at micro-batch size ``batch``: every algorithm measured, usable or not.

        Replaces an earlier run at the same (key, backend, batch): a run is stored whole, so concurrent ranks
        measuring the same size leave one consistent set of rows.
        """
        stored = [r if isinstance(r, BenchmarkRow) else BenchmarkRow.from_perf(r) for r in rows]
        check_key(key, backend_id)
        check_positive("batch", batch)
        for row in stored:
            if row.batch != batch:
                raise CacheError(f"a row for batch {row.batch} in the benchmark run for batch {batch}")
            if row.algo < 0 or row.math_type < 0 or row.workspace_bytes < 0:
                raise CacheError(f"negative algo, math type or workspace in {row}")
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO benchmark_runs (key, backend_id, batch, measured_at) VALUES (?, ?, ?, ?)",
                (key, backend_id, batch, now),
            )
            conn.execute(
                "DELETE FROM benchmarks WHERE key = ? AND backend_id = ? AND batch = ?", (key, backend_id, batch)
            )
            conn.executemany(
                "INSERT OR REPLACE INTO benchmarks (key, backend_id, batch, algo, math_type, status, time_ms, "
                "workspace_bytes, deterministic) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        key,
                        backend_id,
                        batch,
                        r.algo,
                        r.math_type,
                        r.status,
                        r.time_ms if r.usable else None,
                        r.workspace_bytes,
                        int(r.deterministic),
                    )
                    for r in stored
                ],
            )

        self._store.write(write)

    def get_benchmarks(
        self,
        key: str,
        backend_id: str,
        batches: Iterable[int],
        *,
        workspace_limit_bytes: int | None = None,
        deterministic_only: bool = False,
        include_failed: bool = False,
        complete_within: int | None = None,
    ) -> dict[int, list[AlgoPerf]]:
        """The stored runs among ``batches``: {b: perfs} for every b benchmarked (an empty list means it was
        measured and nothing qualifies); sizes never benchmarked are absent. Rows are filtered here, at read
        time, by the optional limit and determinism; failed algorithms come back (with ``inf`` time) only
        with ``include_failed``. Rows are ordered by (algo, math type).

        With ``complete_within``, a run that could not give memory to an algorithm needing at most that many bytes
        of workspace (a row with status ``UNALLOCATED``) is absent too: it says nothing of that algorithm, which a
        plan within that limit could run, so the size must be measured again."""
        wanted = sorted(set(batches))
        out: dict[int, list[AlgoPerf]] = {}
        if not wanted:
            return out
        marks = ", ".join("?" * len(wanted))
        for (b,) in self._store.read(
            f"SELECT batch FROM benchmark_runs WHERE key = ? AND backend_id = ? AND batch IN ({marks})",
            (key, backend_id, *wanted),
        ):
            if is_int(b, 1):
                out[b] = []
        short: set[int] = set()
        rows = self._store.read(
            "SELECT batch, algo, status, time_ms, workspace_bytes, deterministic, math_type FROM benchmarks "
            f"WHERE key = ? AND backend_id = ? AND batch IN ({marks}) ORDER BY batch, algo, math_type",
            (key, backend_id, *wanted),
        )
        for b, algo, status, t, ws, det, mt in rows:
            if not (
                all(is_int(v) for v in (b, algo, ws, mt, det))
                and is_int(status, -(2**31))
                and (t is None or is_time(t))
            ):
                # Written by something else since the file was checked at opening: not a row to plan with.
                log.warning("ignoring a malformed benchmark row in %s for %s: %r", self, key, (b, algo, status, t, ws))
                continue
            row = BenchmarkRow(b, algo, status, math.inf if t is None else float(t), ws, bool(det), mt)
            if status == UNALLOCATED and complete_within is not None and ws <= complete_within:
                short.add(b)
            if b not in out or (not row.usable and not include_failed):
                continue
            if workspace_limit_bytes is not None and row.workspace_bytes > workspace_limit_bytes:
                continue
            if deterministic_only and not row.deterministic:
                continue
            out[b].append(row.to_perf())
        return {b: perfs for b, perfs in out.items() if b not in short}

    def get_benchmark(self, key: str, backend_id: str, batch: int, **filters: Any) -> list[AlgoPerf] | None:
        """One size's stored run (see ``get_benchmarks``), or None if ``batch`` was never benchmarked."""
        return self.get_benchmarks(key, backend_id, [batch], **filters).get(batch)

    # ---------------------------------------------------------------- benchmarks in progress

    @property
    def shared(self) -> bool:
        """True when other processes may plan on this cache with this one: a file, open for writing."""
        return self.path is not None and not self.memory_only and not self.read_only

    def claim_benchmark(
        self, key: str, backend_id: str, batch: int, *, seen: float | None, stale_after_s: float
    ) -> Claim:
        """Claim the benchmark of ``key`` at ``batch`` for this process (see :mod:`ucudnn._cache_claims`): CLAIMED
        (measure it, then ``release_benchmark``), MEASURED (the size's run is another than the one the caller read,
        whose mark from ``run_marks`` is ``seen``, None where it read none: read it) or HELD (a live process claimed
        it less than ``stale_after_s`` ago: wait for its run)."""
        check_key(key, backend_id)
        check_positive("batch", batch)
        return self._store.write(
            lambda conn: _cache_claims.claim(conn, key, backend_id, batch, seen=seen, stale_after_s=stale_after_s)
        )

    def release_benchmark(self, key: str, backend_id: str, batch: int, token: str) -> None:
        """Drop this process's claim on ``key`` at ``batch`` (its run stored, or its benchmark failed)."""
        self._store.write(lambda conn: _cache_claims.release(conn, key, backend_id, batch, token))

    def run_marks(self, key: str, backend_id: str, batches: Sequence[int]) -> dict[int, float]:
        """{b: the mark of its stored run} of ``batches`` (its ``measured_at``): what a later claim or poll compares
        with to tell a run stored since from the one read."""
        if not batches:
            return {}
        runs_sql, _ = _cache_claims.progress_sql(batches)
        rows = self._store.read(runs_sql, (key, backend_id, *batches))
        return {int(b): float(t) for b, t in rows if is_int(b, 1) and is_time(t)}

    def benchmark_progress(
        self, key: str, backend_id: str, batches: Sequence[int]
    ) -> tuple[dict[int, float], dict[int, Holder]]:
        """For a waiter's poll, in two reads: the marks of the runs stored (``run_marks``) and {b: who claimed it}
        of ``batches``."""
        if not batches:
            return {}, {}
        _, claims_sql = _cache_claims.progress_sql(batches)
        runs = self.run_marks(key, backend_id, batches)
        return runs, _cache_claims.holders(self._store.read(claims_sql, (key, backend_id, *batches)))

    # ---------------------------------------------------------------- plans

    def put_plan(self, pk: PlanKey, plan: Plan) -> None:
        """Store ``plan`` under ``pk`` (replacing any earlier one)."""
        check_key(pk.key, pk.backend_id)
        check_positive("batch", pk.batch)
        if plan.batch != pk.batch:
            raise CacheError(f"plan covers {plan.batch} samples, not batch {pk.batch}")
        if plan.workspace_bytes > pk.workspace_limit_bytes:
            raise CacheError(f"plan needs {plan.workspace_bytes} B, over the limit {pk.workspace_limit_bytes} B")
        if not is_time(plan.time_ms):
            raise CacheError(f"plan time {plan.time_ms!r} ms is not a finite non-negative number")
        plan_json = _steps_json([(mb.batch, mb.algo, mb.math_type) for mb in plan.micro_batches])
        params = (*pk.params(), plan_json, float(plan.time_ms), int(plan.workspace_bytes), time.time())
        self._store.write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO plans (key, backend_id, batch, policy, workspace_limit, deterministic_only, "
                "plan_json, time_ms, workspace_bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params,
            )
        )

    def get_plan(self, pk: PlanKey, *, algo_count: int | None = None) -> Plan | None:
        """The stored plan for ``pk``, validated, or None. A stored row that fails validation (sizes that do not
        sum to N, sizes the policy does not allow, algorithms out of range, a workspace over the limit, a
        non-deterministic kernel in a deterministic plan) is ignored with a warning; planning again replaces it.

        Micro-batch times, workspaces and determinism come from the benchmark rows; a step whose size was
        benchmarked without that algorithm running makes the row bad. A size with no stored run at all (a plan
        imported alone, or written by another tool) gets its time apportioned from the plan's totals."""
        rows = self._store.read(
            "SELECT plan_json, time_ms, workspace_bytes FROM plans WHERE key = ? AND backend_id = ? AND batch = ? "
            "AND policy = ? AND workspace_limit = ? AND deterministic_only = ?",
            pk.params(),
        )
        if not rows:
            return None
        plan_json, time_ms, workspace_bytes = rows[0]
        try:
            steps = validate_plan_row(pk, plan_json, time_ms, workspace_bytes, algo_count)
            plan = self._rebuild(pk, steps, float(time_ms), int(workspace_bytes))
        except CacheError as exc:
            log.warning("ignoring a bad cached plan in %s for %s at N=%d: %s", self, pk.key, pk.batch, exc)
            return None
        return plan

    def _rebuild(self, pk: PlanKey, steps: list[tuple[int, int, int]], time_ms: float, ws: int) -> Plan:
        measured = self.get_benchmarks(pk.key, pk.backend_id, {b for b, _, _ in steps})
        by_id = {(p.batch, p.algo, p.math_type): p for perfs in measured.values() for p in perfs}
        micro: list[MicroBatch] = []
        for b, algo, mt in steps:
            perf = by_id.get((b, algo, mt))
            if perf is None and b in measured:
                raise CacheError(f"algo {algo} (math type {mt}) did not run at b={b} when it was benchmarked")
            if perf is None:
                micro.append(MicroBatch(b, algo, time_ms * b / pk.batch, ws, pk.deterministic_only, mt))
                continue
            if perf.workspace_bytes > pk.workspace_limit_bytes:
                raise CacheError(f"algo {algo} at b={b} needs {perf.workspace_bytes} B, over the limit")
            if pk.deterministic_only and not perf.deterministic:
                raise CacheError(f"algo {algo} at b={b} is not deterministic")
            micro.append(MicroBatch.from_perf(perf))
        return Plan(tuple(micro))

    # ---------------------------------------------------------------- verdicts and device facts

    def put_verdict(self, v: Verdict) -> None:
        """Store the outcome of a check on real executions (replacing an earlier one for the same plan)."""
        params = (*v.plan_key.params(), _steps_json(v.plan), _steps_json(v.undivided), int(v.kept))
        self._store.write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO verdicts (key, backend_id, batch, policy, workspace_limit, deterministic_only, "
                "plan_json, undivided_json, kept, plan_ms, undivided_ms, samples, measured_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*params, float(v.plan_ms), float(v.undivided_ms), int(v.samples), time.time()),
            )
        )

    def get_verdict(self, pk: PlanKey, plan: Sequence[tuple[int, int, int]]) -> Verdict | None:
        """The stored check of ``plan`` (``(batch, algo, math_type)`` steps) under ``pk``, or None. A malformed
        row is ignored with a warning (the plan is then checked again)."""
        try:
            rows = self._store.read(
                "SELECT undivided_json, kept, plan_ms, undivided_ms, samples FROM verdicts WHERE key = ? AND "
                "backend_id = ? AND batch = ? AND policy = ? AND workspace_limit = ? AND deterministic_only = ? "
                "AND plan_json = ?",
                (*pk.params(), _steps_json(plan)),
            )
        except sqlite3.OperationalError:  # an older read-only cache without the table
            return None
        if not rows:
            return None
        undivided_json, kept, plan_ms, undivided_ms, samples = rows[0]
        try:
            steps = parse_steps(loads_or_raw(undivided_json), pk.batch, "undivided", None)
            if kept not in (0, 1) or not is_time(plan_ms) or not is_time(undivided_ms) or not is_int(samples, 1):
                raise CacheError("kept, times or samples out of range")
        except CacheError as exc:
            log.warning("ignoring a bad verdict in %s for %s at N=%d: %s", self, pk.key, pk.batch, exc)
            return None
        return Verdict(pk, tuple(plan), tuple(steps), bool(kept), float(plan_ms), float(undivided_ms), int(samples))

    def put_fact(self, backend_id: str, name: str, value: float) -> None:
        """Store a fact measured once per device (e.g. ``call_cost_ms``)."""
        check_key(name, backend_id)
        if not is_time(value):
            raise CacheError(f"{name}={value!r} is not a finite non-negative number")
        self._store.write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO device_facts (backend_id, name, value, measured_at) VALUES (?, ?, ?, ?)",
                (backend_id, name, float(value), time.time()),
            )
        )

    def get_fact(self, backend_id: str, name: str) -> float | None:
        try:
            rows = self._store.read(
                "SELECT value FROM device_facts WHERE backend_id = ? AND name = ?", (backend_id, name)
            )
        except sqlite3.OperationalError:
            return None
        return float(rows[0][0]) if rows and is_time(rows[0][0]) else None

    # ---------------------------------------------------------------- maintenance (the `ucudnn db` CLI)

    def stats(self, *, stale_after_s: float = 60.0) -> dict[str, Any]:
        """Counts for ``ucudnn db stats``; file sizes include the WAL. Claims are split into those that bind (a
        benchmark in progress) and void ones (their process ended, or older than ``stale_after_s``)."""

        def one(sql: str) -> int:
            return int(self._store.read(sql)[0][0])

        backends: dict[str, dict[str, int]] = {}
        for backend, n in self._store.read("SELECT backend_id, COUNT(*) FROM benchmark_runs GROUP BY backend_id"):
            backends.setdefault(backend, {"benchmark_runs": 0, "plans": 0})["benchmark_runs"] = int(n)
        for backend, n in self._store.read("SELECT backend_id, COUNT(*) FROM plans GROUP BY backend_id"):
            backends.setdefault(backend, {"benchmark_runs": 0, "plans": 0})["plans"] = int(n)
        return {
            "path": str(self.path) if self.path else ":memory:",
            "schema_version": SCHEMA_VERSION,
            "kernels": one("SELECT COUNT(*) FROM (SELECT key FROM benchmark_runs UNION SELECT key FROM plans)"),
            "benchmark_runs": one("SELECT COUNT(*) FROM benchmark_runs"),
            "benchmark_rows": one("SELECT COUNT(*) FROM benchmarks"),
            "plans": one("SELECT COUNT(*) FROM plans"),
            "verdicts": self._optional_count("verdicts"),
            "device_facts": self._optional_count("device_facts"),
            "benchmark_claims": self._optional_count("benchmark_claims"),
            "void_claims": self._void_claims(stale_after_s),
            "file_bytes": self._store.file_bytes(),
            # How processes share the file: its journal mode (wal, delete; None in memory) and its file system.
            "journal": self._store.file_journal(),
            "file_system": self._store.file_system,
            "backends": dict(sorted(backends.items())),
        }

    def _optional_count(self, table: str) -> int:
        """Rows of a table added after schema version 1 (0 where an older read-only cache lacks it)."""
        try:
            return int(self._store.read(f"SELECT COUNT(*) FROM {table}")[0][0])
        except sqlite3.OperationalError:
            return 0

    def _void_claims(self, stale_after_s: float) -> int:
        """Claims that no longer bind: left by a process that ended (killed while it measured) or held too long."""
        try:
            rows = self._store.read("SELECT host, pid, claimed_at FROM benchmark_claims")
        except sqlite3.OperationalError:  # an older read-only cache without the table
            return 0
        return _cache_claims.void_count(rows, time.time(), stale_after_s)

    def list_kernels(self) -> list[dict[str, Any]]:
        """Per (kernel key, backend): the micro-batch sizes benchmarked and the stored plans, sorted."""
        kernels: dict[tuple[str, str], dict[str, Any]] = {}

        def entry(key: str, backend: str) -> dict[str, Any]:
            return kernels.setdefault(
                (key, backend), {"key": key, "backend_id": backend, "batches_benchmarked": [], "plans": []}
            )

        for key, backend, b in self._store.read("SELECT key, backend_id, batch FROM benchmark_runs ORDER BY 1, 2, 3"):
            entry(key, backend)["batches_benchmarked"].append(b)  # as stored: a listing never fails on a row
        for key, backend, b, pol, lim, det, pj, t, ws in self._store.read(
            "SELECT key, backend_id, batch, policy, workspace_limit, deterministic_only, plan_json, time_ms, "
            "workspace_bytes FROM plans ORDER BY 1, 2, 3, 4, 5, 6"
        ):
            entry(key, backend)["plans"].append(_plan_entry(b, pol, lim, det, pj, t, ws))
        return [kernels[k] for k in sorted(kernels)]

    def export(self) -> dict[str, Any]:
        """Everything, as a JSON-ready object in a stable order (``import_data`` reads it back)."""
        runs: dict[tuple[str, str, int], dict[str, Any]] = {}
        for key, backend, b, at in self._store.read(
            "SELECT key, backend_id, batch, measured_at FROM benchmark_runs ORDER BY 1, 2, 3"
        ):
            runs[(key, backend, b)] = {"key": key, "backend_id": backend, "batch": b, "measured_at": at, "algos": []}
        for key, backend, b, algo, mt, status, t, ws, det in self._store.read(
            "SELECT key, backend_id, batch, algo, math_type, status, time_ms, workspace_bytes, deterministic "
            "FROM benchmarks ORDER BY 1, 2, 3, 4, 5"
        ):
            run = runs.get((key, backend, b))
            if run is not None:
                run["algos"].append(
                    {
                        "algo": algo,
                        "math_type": mt,
                        "status": status,
                        "time_ms": t,
                        "workspace_bytes": ws,
                        "deterministic": bool(det),
                    }
                )
        plans = [
            {"key": key, "backend_id": backend, **_plan_entry(b, pol, lim, det, pj, t, ws), "created_at": at}
            for key, backend, b, pol, lim, det, pj, t, ws, at in self._store.read(
                "SELECT key, backend_id, batch, policy, workspace_limit, deterministic_only, plan_json, time_ms, "
                "workspace_bytes, created_at FROM plans ORDER BY 1, 2, 3, 4, 5, 6"
            )
        ]
        return {"format": EXPORT_FORMAT, "version": SCHEMA_VERSION, "benchmarks": list(runs.values()), "plans": plans}

    def import_data(self, data: Any) -> dict[str, int]:
        """Merge an ``export()`` object: validated as a whole first (CacheError naming the bad element, nothing
        written), then written in one transaction. Imported runs and plans replace stored ones with the same key.
        Returns the counts written."""
        runs, plans = validate_import(data)

        def write(conn: sqlite3.Connection) -> None:
            for run in runs:
                ident = (run["key"], run["backend_id"], run["batch"])
                conn.execute(
                    "INSERT OR REPLACE INTO benchmark_runs (key, backend_id, batch, measured_at) VALUES (?, ?, ?, ?)",
                    (*ident, run["measured_at"]),
                )
                conn.execute("DELETE FROM benchmarks WHERE key = ? AND backend_id = ? AND batch = ?", ident)
                conn.executemany(
                    "INSERT OR REPLACE INTO benchmarks (key, backend_id, batch, algo, math_type, status, time_ms, "
                    "workspace_bytes, deterministic) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            *ident,
                            a["algo"],
                            a["math_type"],
                            a["status"],
                            a["time_ms"],
                            a["workspace_bytes"],
                            int(a["deterministic"]),
                        )
                        for a in run["algos"]
                    ],
                )
            conn.executemany(
                "INSERT OR REPLACE INTO plans (key, backend_id, batch, policy, workspace_limit, deterministic_only, "
                "plan_json, time_ms, workspace_bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        p["key"],
                        p["backend_id"],
                        p["batch"],
                        p["policy"],
                        p["workspace_limit"],
                        int(p["deterministic_only"]),
                        json.dumps(p["micro_batches"]),
                        p["time_ms"],
                        p["workspace_bytes"],
                        p["created_at"],
                    )
                    for p in plans
                ],
            )

        self._store.write(write)
        return {"benchmark_runs": len(runs), "benchmark_rows": sum(len(r["algos"]) for r in runs), "plans": len(plans)}

    def clear(self, *, plans_only: bool = False) -> dict[str, int]:
        """Delete every plan and verdict (checks of plans on real executions), and unless ``plans_only`` every
        benchmark row, device fact and claim of a benchmark in progress too. Returns the counts deleted."""

        def delete(conn: sqlite3.Connection, table: str) -> int:
            try:
                return int(conn.execute(f"DELETE FROM {table}").rowcount)
            except sqlite3.OperationalError:  # an added table an older cache lacks
                return 0

        def write(conn: sqlite3.Connection) -> dict[str, int]:
            counts = {"plans": delete(conn, "plans"), "verdicts": delete(conn, "verdicts")}
            if not plans_only:
                counts["benchmark_rows"] = delete(conn, "benchmarks")
                counts["benchmark_runs"] = delete(conn, "benchmark_runs")
                counts["device_facts"] = delete(conn, "device_facts")
                counts["benchmark_claims"] = delete(conn, "benchmark_claims")
            return counts

        counts = self._store.write(write)
        if not plans_only:
            self._store.vacuum()
        return counts


def _plan_entry(
    batch: int, policy: str, limit: int, deterministic_only: int, plan_json: str, time_ms: float, ws: int
) -> dict[str, Any]:
    """A ``plans`` row as listed and exported (``import_data`` reads it back)."""
    return {
        "batch": batch,
        "policy": policy,
        "workspace_limit": limit,
        "deterministic_only": bool(deterministic_only),
        "micro_batches": loads_or_raw(plan_json),
        "time_ms": time_ms,
        "workspace_bytes": ws,
    }
