"""``ucudnn db``: inspect and maintain the SQLite cache of benchmarks and plans.

``stats``, ``list``, ``export [FILE]`` (stdout by default), ``import FILE`` (``-`` for stdin), ``clear
[--plans-only] [--yes]``; ``--database`` before or after the action. Only ``import`` creates a cache (saying so
when it creates its directory); the others need an existing one. ``stats``, ``list`` and ``export`` change no file:
a cache they cannot use is left as it is. A file that is not a ucudnn cache is never touched by any action. Exit
status 0 on success, 2 for bad input or no usable cache at the path (a one-line message on stderr).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from ucudnn import config, perf_table
from ucudnn._cache_fs import shared_across_hosts
from ucudnn.cache import Cache, CacheError
from ucudnn.cli._files import (
    BadJson,
    MissingFile,
    NotACache,
    blank,
    ensure_parent,
    existing_cache,
    read_json,
    refuse_foreign,
)
from ucudnn.plan_text import format_plan, op_of_key, short_kernel_name

EXIT_OK, EXIT_BAD_INPUT = 0, 2


class _BadInput(Exception):
    pass


_DATABASE_HELP = "cache file (default: from UCUDNN_DATABASE or per-user); before or after ACTION"
# Actions that need an existing file and never create one.
_EXISTING = frozenset({"stats", "list", "export", "clear"})
# Actions that only read: they change nothing on disk (no journal switch, no lock file, nothing moved aside).
_READ_ONLY = frozenset({"stats", "list", "export"})


def _action(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str
) -> argparse.ArgumentParser:
    """An action's parser; it takes --database too (``ucudnn db stats --database F``), without overriding one
    given before the action when it is not repeated."""
    parser = actions.add_parser(name, help=text)
    parser.add_argument("--database", metavar="PATH", default=argparse.SUPPRESS, help=_DATABASE_HELP)
    return parser


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "db",
        help="inspect and maintain the cache of benchmarks and plans",
        description="Inspect and maintain the SQLite cache (UCUDNN_DATABASE, else the per-user default).",
    )
    p.add_argument("--database", metavar="PATH", help=_DATABASE_HELP)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    stats = _action(actions, "stats", "counts of kernels, benchmark rows and plans; file size; backends")
    stats.add_argument("--json", action="store_true", help="print a JSON object")
    listing = _action(actions, "list", "kernels (short names; full keys with --json), sizes benchmarked, plans")
    listing.add_argument("--json", action="store_true", help="print JSON")
    export = _action(actions, "export", "write everything as JSON (stable order)")
    export.add_argument("file", nargs="?", default="-", metavar="FILE", help="output file (default: stdout)")
    export.add_argument(
        "--perf-table",
        action="store_true",
        help="write the benchmarks as a performance table for `ucudnn plan --table` instead",
    )
    export.add_argument(
        "--batch", type=int, help="with --perf-table: mini-batch of every kernel (default: the largest measured)"
    )
    export.add_argument("--backend-id", help="with --perf-table: the backend to export (needed if there are several)")
    imp = _action(actions, "import", "merge a JSON export into the cache (validated first; creates the cache)")
    imp.add_argument("file", metavar="FILE", help="JSON file written by `ucudnn db export` (- for stdin)")
    clear = _action(actions, "clear", "delete everything, or only the plans")
    clear.add_argument("--plans-only", action="store_true", help="keep the benchmark rows")
    clear.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path: Path | str = args.database or "the cache"
    try:
        given = args.database is not None and not blank(args.database)  # blank: not given
        path = Path(args.database).expanduser() if given else config.database_path()
        if args.action in _EXISTING:
            existing_cache(path)  # a typo must not become an empty cache
        refuse_foreign(path)  # never touched, whatever the action
        if args.action == "import":
            data = _read_json(args.file)  # before opening: a bad file must not create an empty cache
            ensure_parent(path, "ucudnn db")
        with Cache(path, read_only=args.action in _READ_ONLY) as cache:
            if args.action == "stats":
                _print_stats(cache.stats(stale_after_s=float(config.get("UCUDNN_BENCHMARK_WAIT"))), args.json)
            elif args.action == "list":
                _print_list(cache.list_kernels(), args.json)
            elif args.action == "export":
                exported = cache.export()
                if args.perf_table:
                    exported = perf_table.from_cache_export(exported, batch=args.batch, backend_id=args.backend_id)
                elif args.batch is not None or args.backend_id is not None:
                    raise _BadInput("--batch and --backend-id only apply with --perf-table")
                _write_json(exported, args.file)
            elif args.action == "import":
                counts = cache.import_data(data)
                print(f"imported {_counts(counts)} into {path}")
            elif args.action == "clear":
                what = "all plans" if args.plans_only else "all benchmarks and plans"
                if not args.yes and not _confirm(f"delete {what} in {path}?"):
                    raise _BadInput(f"not clearing {path} without confirmation (pass --yes)")
                print(f"deleted {_counts(cache.clear(plans_only=args.plans_only))} from {path}")
    except (_BadInput, MissingFile, NotACache, CacheError, config.ConfigError, perf_table.PerfTableError) as exc:
        print(f"ucudnn db: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"ucudnn db: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_BAD_INPUT
    except sqlite3.Error as exc:
        print(f"ucudnn db: SQLite cannot read or write {path}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # never a traceback: one line naming the file, exit 2
        print(f"ucudnn db: cannot {args.action} {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items())


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _read_json(file: str) -> Any:
    try:
        return read_json(file, "a ucudnn export")
    except BadJson as exc:
        raise _BadInput(str(exc)) from None


def _write_json(data: Any, file: str) -> None:
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if file == "-":
        sys.stdout.write(text)
        return
    try:
        Path(file).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _BadInput(f"cannot write {file}: {exc.strerror or exc}") from None


def _print_stats(stats: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(stats, indent=2, sort_keys=True))
        return
    print(f"database:        {stats['path']} (schema {stats['schema_version']}, {stats['file_bytes']} bytes)")
    print(f"kernels:         {stats['kernels']}")
    print(f"benchmark runs:  {stats['benchmark_runs']} ({stats['benchmark_rows']} algorithm rows)")
    print(f"plans:           {stats['plans']}")
    fs = stats.get("file_system")
    if stats.get("journal") == "delete":
        where = f"{fs}, " if fs else ""
        who = "processes on several hosts may share it" if shared_across_hosts(fs) else "processes on this host"
        print(f"sharing:         rollback journal and file locks ({where}{who}; UCUDNN_DATABASE_JOURNAL)")
    elif stats.get("journal") == "wal":
        where = f"{fs}: " if fs else ""
        print(f"sharing:         write-ahead log ({where}processes on this host only; UCUDNN_DATABASE_JOURNAL)")
    claims, void = stats.get("benchmark_claims", 0), stats.get("void_claims", 0)
    if claims > void:  # sizes a planning process is measuring now
        print(f"in progress:     {claims - void} benchmark(s) claimed by planning processes")
    if void:  # left by a process killed while it measured, or held past UCUDNN_BENCHMARK_WAIT: replaced when met
        print(f"void claims:     {void} (their processes ended or held them too long; the next planner measures them)")
    for backend, counts in stats["backends"].items():
        print(f"backend:         {backend}: {counts['benchmark_runs']} runs, {counts['plans']} plans")


def _print_list(kernels: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(kernels, indent=2, sort_keys=True))
        return
    backends = sorted({str(k["backend_id"]) for k in kernels})
    for b, backend in enumerate(backends, 1):
        print(f"backend {b}: {backend}")
    print(f"{len(kernels)} kernel(s); plans read `count x micro-batch size algorithm`; full keys: --json")
    for i, k in enumerate(kernels):
        print(f"[{i}] {short_kernel_name(k['key'], 100)}  (backend {backends.index(str(k['backend_id'])) + 1})")
        sizes = k["batches_benchmarked"]
        print(f"  benchmarked at b = {', '.join(map(str, sizes)) if sizes else '(none)'}")
        op = op_of_key(k["key"])
        for p in k["plans"]:
            steps = p["micro_batches"]
            try:
                shown = format_plan(steps, op)
                cost = f"{float(p['time_ms']):.4g} ms, {config.format_size(int(p['workspace_bytes']))}"
            except (TypeError, ValueError, IndexError, KeyError):  # a damaged row is shown, not fatal
                shown, cost = repr(steps)[:60], f"{p['time_ms']!r} ms, {p['workspace_bytes']!r} B"
            limit = p["workspace_limit"]
            limit_text = config.format_size(limit) if isinstance(limit, int) else repr(limit)
            det = " det" if p["deterministic_only"] else ""
            print(f"  N={p['batch']} {p['policy']} limit {limit_text}{det}: {shown} ({cost})")
