"""``ucudnn-bench``: measured speedups of ucudnn over plain cuDNN under workspace limits.

Exit status: 0 when every configuration ran (or was skipped with a reason) and every ucudnn output matched the
undivided output; 1 when an output did not match; 2 for bad input (problem file, suite, size, option) or a
backend that cannot run here.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ucudnn import __version__, config
from ucudnn._cudnn_abi import Op
from ucudnn.bench.problems import SETS, Problem, ProblemError, dedupe, load_problems, with_batch
from ucudnn.bench.suites import SUITES, get_suite
from ucudnn.cli._files import NotACache, blank, ensure_parent, refuse_foreign
from ucudnn.cli._parser import Parser
from ucudnn.config import ConfigError, format_size, parse_size

if TYPE_CHECKING:  # imported by main() once the options are checked: they load numpy and the native libraries
    from ucudnn.bench.backends import Backend
    from ucudnn.bench.runner import Row, Runner

OPS = tuple(op.label for op in Op)
POLICIES = ("undivided", "powerOfTwo", "all")
DEFAULT_LIMITS = "8MiB,64MiB,512MiB"
# --quick: limits that bind on the quick suite's layers (their im2col-style workspaces at N are tens of MiB).
QUICK_LIMITS = "1MiB,4MiB,16MiB"
QUICK_REPEAT = 3
# Measured (`time ucudnn-bench --quick` with an empty cache, 2026-11-26, other work on the 2 cores: 24.8-29.2 s at load
# average 2.8-3.1, 44 s at 4.2); the README states the same figure (a test holds them together).
QUICK_DURATION = "25-45 s on 2 CPU cores"

EPILOG = f"""
timing, as a framework runs: each sample is --calls-per-sample back-to-back calls issued without synchronising
between them, and its time is the total / the number of calls. Every execution is warmed up (--warmup samples), then
the undivided baseline and ucudnn are sampled alternately --repeat times each (both see the same background load);
medians are reported, and the speedup is the median of the pairs' ratios. The host backend times with the wall clock
(time.perf_counter) by default, each sample the least of --best-of (3) timings taken back to back (other processes'
work only ever adds time); with --host-timing model (UCUDNN_HOST_TIMING=model) its Find reports modelled times and
executions are timed by its model clock (ucudnn_host_model_clock_ms: the modelled time of exactly the convolutions
that ran), so measured and predicted speedups are comparable. The cuda backend times with CUDA events on the
handle's stream, recorded before the first call of a sample and after its last, with the sample's calls queued
behind a short gate kernel (timing cuda-events-gated): the GPU then runs them back to back, so the events time the
GPU's work and not the host's issuing of it (cuDNN 9 spends 50-150 us of host time per call, as long as many kernels
at N = 256 take). The host time spent issuing a sample's calls (before any synchronisation) is reported per call too
(*_host_us_per_call in JSON/CSV, column "host us" with -v).

the preload library checks each new micro-batched plan on its first 2*(S+1) executions against the undivided
choice (S = UCUDNN_VERIFY_SAMPLES, 0: off) and then runs the faster. When a row's first call starts such a
check, ucudnn is warmed up through at least 2*(S+1) calls before timing, so the timed samples run the settled
choice; a row records whether its plan was checked (verified) and replaced (rejected_by_measurement).

what is compared, per problem x op x limit: the fastest algorithm that Find on cuDNN itself reports within the
limit, run undivided (what cuDNN alone does); ucudnn's plan for each policy, run through the preload library
(Get_v7, workspace query, execution); and the fastest algorithm with unlimited workspace (the ceiling).
speedup = undivided time / ucudnn time. faster/slower in the summary: speedup > 1.05 / < 0.95.
ucudnn's output must match the undivided one: max|diff| / max|reference| <= --tolerance (default 1e-3 on the
host, 1e-2 on cuda where cuDNN may use TF32).

planning results go to the SQLite cache (UCUDNN_DATABASE or --database), so a second run plans from the cache;
planning time is reported separately (column "plan s") and is not part of the measured times.

built-in suites: {", ".join(SUITES)}.
--quick alone = --suite quick --workspace {QUICK_LIMITS} --repeat {QUICK_REPEAT} --threads 1 on the host backend.
examples:
  ucudnn-bench --quick
  ucudnn-bench --problems conv_train.csv --batch 256 --dedupe --ops fwd --workspace 8MiB,64MiB,512MiB
  ucudnn-bench --problems DeepBench/code/kernels/conv_problems.h --set inference_server --json out.json
"""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="ucudnn-bench",
        description="Benchmark ucudnn (micro-batched cuDNN convolutions) against undivided cuDNN under "
        "workspace limits, on DeepBench problem files or built-in suites.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"ucudnn-bench {__version__}")
    _problem_options(p.add_argument_group("problems"))
    _run_options(p.add_argument_group("what to run"))
    _output_options(p.add_argument_group("output"))
    return p


def _problem_options(src: argparse._ArgumentGroup) -> None:
    src.add_argument(
        "--problems",
        metavar="FILE",
        type=Path,
        help="DeepBench-order CSV (w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h; header and leading "
        "label column optional), the original μ-cuDNN CSV, or DeepBench's conv_problems.h",
    )
    src.add_argument(
        "--set",
        default="training",
        metavar="NAME",
        help=f"problem set of a conv_problems.h file: {', '.join(SETS)} (default training)",
    )
    src.add_argument("--suite", metavar="NAME", help="a built-in suite (see --list-suites)")
    src.add_argument("--list-suites", action="store_true", help="list the built-in suites and exit")
    src.add_argument("--quick", action="store_true", help=f"the quick suite on the host backend ({QUICK_DURATION})")
    batch = src.add_mutually_exclusive_group()
    batch.add_argument("--batch", type=int, metavar="N", help="force every problem's batch size to N")
    batch.add_argument("--batch-multiplier", type=int, metavar="K", help="multiply every problem's batch size by K")
    src.add_argument("--dedupe", action="store_true", help="drop repeated problems (after the batch change)")
    src.add_argument("--limit-problems", type=int, metavar="K", help="keep only the first K problems")


def _run_options(what: argparse._ArgumentGroup) -> None:
    what.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {','.join(OPS)} (default all)")
    what.add_argument(
        "--policy", default="powerOfTwo", help=f"comma-separated batch-size policies: {','.join(POLICIES)}"
    )
    what.add_argument(
        "--api",
        choices=("legacy", "graph"),
        default="legacy",
        help="how ucudnn is called: the legacy convolution API (Get*_v7, workspace query, cudnnConvolution*; "
        "the default) or the graph API as cudnn_frontend calls it (the fastest engine planned, its workspace "
        "answered by the preload library, cudnnBackendExecute)",
    )
    what.add_argument(
        "--workspace",
        metavar="SIZES",
        help=f"comma-separated per-kernel workspace limits (default {DEFAULT_LIMITS}; --quick: {QUICK_LIMITS})",
    )
    what.add_argument("--backend", choices=("host", "cuda"), default="host", help="host (CPU, default) or cuda")
    what.add_argument(
        "--host-timing",
        choices=("measure", "model"),
        help="host backend timing (sets UCUDNN_HOST_TIMING; default: the environment's, else measure)",
    )
    what.add_argument(
        "--threads",
        type=int,
        metavar="T",
        help="host backend: BLAS threads (sets OPENBLAS_NUM_THREADS; default: the environment's, --quick: 1)",
    )
    what.add_argument(
        "--repeat", type=int, metavar="R", help=f"timed samples per configuration (default 5; quick {QUICK_REPEAT})"
    )
    what.add_argument(
        "--best-of",
        type=int,
        metavar="K",
        help="host backend, wall clock: each sample is the least of K timings of its calls, taken back to back -- "
        "work of other processes only ever adds time (default 3; 1: a single timing)",
    )
    what.add_argument(
        "--calls-per-sample",
        type=int,
        metavar="K",
        help="back-to-back calls per timing sample, issued without synchronising; the sample's time is divided by "
        "K (default on cuda: enough calls for a sample of --sample-ms by the kernel's Find time, 2 to 10 -- calls are "
        "asynchronous there and one call between two events measures the host's latency, not the kernel; 1 on host, "
        "whose calls are synchronous: more would measure the same thing, only slower)",
    )
    what.add_argument(
        "--sample-ms",
        type=float,
        default=2.0,
        metavar="MS",
        help="cuda without --calls-per-sample: the length a timing sample is sized for (default 2)",
    )
    what.add_argument("--warmup", type=int, default=1, metavar="W", help="untimed samples first (default 1)")
    what.add_argument("--tolerance", type=float, help="max relative output error (default: backend's)")
    what.add_argument("--seed", type=int, default=1234, help="seed of the random inputs")
    what.add_argument("--database", metavar="PATH", help="SQLite cache (sets UCUDNN_DATABASE)")
    what.add_argument("--preload", metavar="PATH", help="preload library to test (default: the installed one)")


def _output_options(out: argparse._ArgumentGroup) -> None:
    out.add_argument("--json", type=Path, metavar="FILE", help="write every row and the summary as JSON")
    out.add_argument("--csv", type=Path, metavar="FILE", help="write every row as CSV")
    out.add_argument("--plot", type=Path, metavar="FILE.png", help="bar chart of speedups (needs matplotlib)")
    out.add_argument(
        "--progress",
        choices=("auto", "bar", "lines", "none"),
        default="auto",
        help="progress on stderr (auto: a bar on a terminal, plain lines otherwise)",
    )
    out.add_argument("-v", "--verbose", action="store_true", help="also print every row")


class UsageError(ValueError):
    pass


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _choose(
    text: str, option: str, what: str, known: Sequence[str], aliases: dict[str, str] | None = None
) -> list[str]:
    """The distinct names of a comma-separated option, in order: each one of ``known`` (any case) or an alias."""
    out: list[str] = []
    for item in _split(text):
        low = item.lower()
        name = (aliases or {}).get(low) or next((k for k in known if k.lower() == low), None)
        if name is None:
            raise UsageError(f"{option}: unknown {what} {item!r}; expected some of {','.join(known)}")
        if name not in out:
            out.append(name)
    if not out:
        raise UsageError(f"{option}: empty")
    return out


def parse_ops(text: str) -> list[str]:
    aliases = {"forward": "fwd", "bwd_data": "bwd-data", "bwd_filter": "bwd-filter", "bwddata": "bwd-data"}
    return _choose(text, "--ops", "op", OPS, aliases)


def parse_policies(text: str) -> list[str]:
    return _choose(text, "--policy", "policy", POLICIES)


def parse_limits(text: str) -> list[int]:
    out: list[int] = []
    for item in _split(text):
        size = parse_size(item, name="--workspace")
        if size not in out:
            out.append(size)
    if not out:
        raise UsageError("--workspace: empty")
    return out


def select_problems(args: argparse.Namespace) -> tuple[list[Problem], str, str]:
    """The problems of this run, a description of where they came from, and a line saying what the problem labels
    mean (a built-in suite's description; empty for a file)."""
    legend = ""
    if args.problems is not None and args.suite is not None:
        raise UsageError("give --problems or --suite, not both")
    if args.problems is not None:
        if args.set.removesuffix("_set") not in SETS and args.problems.suffix.lower() in (".h", ".hpp"):
            raise UsageError(f"--set {args.set!r}: expected one of {', '.join(SETS)}")
        problems = load_problems(args.problems, args.set)
        source = str(args.problems)
    else:
        name = args.suite or ("quick" if args.quick else None)
        if name is None:
            raise UsageError("nothing to run: give --problems FILE, --suite NAME or --quick (see --help)")
        suite = get_suite(name)
        problems = suite.problems()
        source = f"suite {suite.name}"
        legend = f"suite {suite.name}: {suite.description}"
    if args.batch is not None or args.batch_multiplier is not None:
        problems = with_batch(problems, batch=args.batch, multiplier=args.batch_multiplier)
        source += f", N={args.batch}" if args.batch is not None else f", N x{args.batch_multiplier}"
    if args.dedupe:
        before = len(problems)
        problems = dedupe(problems)
        source += f", deduplicated {before}->{len(problems)}"
    if args.limit_problems is not None:
        if args.limit_problems <= 0:
            raise UsageError(f"--limit-problems {args.limit_problems}: must be positive")
        problems = problems[: args.limit_problems]
        source += f", first {len(problems)}"
    return problems, source, legend


def list_suites() -> str:
    lines = []
    for s in SUITES.values():
        lines.append(f"{s.name:<9} {len(s.layers):>2} layers, N={s.batch:<4} {s.description}")
    return "\n".join(lines)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@dataclass(frozen=True)
class _Run:
    """What the command line asks for, checked: the problems and where they came from, what to run, the cache."""

    problems: list[Problem]
    source: str
    legend: str
    ops: list[str]
    policies: list[str]
    limits: list[int]
    repeat: int
    threads: int | None
    database: Path
    explicit_database: bool


def _error(message: str) -> int:
    print(f"ucudnn-bench: error: {message}", file=sys.stderr)
    return 2


def _check(args: argparse.Namespace) -> _Run:
    """The run ``args`` describe; UsageError (or ProblemError, ConfigError, NotACache) for what is wrong."""
    problems, source, legend = select_problems(args)
    ops = parse_ops(args.ops)
    policies = parse_policies(args.policy)
    limits = parse_limits(args.workspace or (QUICK_LIMITS if args.quick else DEFAULT_LIMITS))
    repeat = args.repeat if args.repeat is not None else (QUICK_REPEAT if args.quick else 5)
    if repeat <= 0 or args.warmup < 0:
        raise UsageError("--repeat must be positive and --warmup not negative")
    if args.calls_per_sample is not None and args.calls_per_sample <= 0:
        raise UsageError(f"--calls-per-sample {args.calls_per_sample}: must be positive")
    if not args.sample_ms > 0:
        raise UsageError(f"--sample-ms {args.sample_ms}: must be positive")
    threads = args.threads
    if threads is None and args.quick and args.backend == "host" and "OPENBLAS_NUM_THREADS" not in os.environ:
        threads = 1  # steady timings on a shared or small machine; see --threads
    if threads is not None and threads <= 0:
        raise UsageError(f"--threads {threads}: must be positive")
    if args.best_of is not None and args.best_of <= 0:
        raise UsageError(f"--best-of {args.best_of}: must be positive")
    if args.quick and args.backend != "host":
        raise UsageError("--quick runs on the host backend; drop --backend or --quick")
    if args.plot is not None:
        from ucudnn.bench.report import plot_unavailable

        missing = plot_unavailable()
        if missing:
            raise UsageError(f"{missing}; nothing was run")
    explicit = args.database is not None and not blank(args.database)  # blank: not given
    database = Path(args.database).expanduser() if explicit else config.database_path()
    refuse_foreign(database)
    return _Run(problems, source, legend, ops, policies, limits, repeat, threads, database, explicit)


def _use_database(run: _Run) -> None:
    """Point the planner at --database (through UCUDNN_DATABASE), its directory made; OSError if it cannot be."""
    if run.explicit_database:
        os.environ["UCUDNN_DATABASE"] = str(run.database)
        ensure_parent(run.database, "ucudnn-bench")


@dataclass(frozen=True)
class _Outcome:
    """The rows measured, whether the run was interrupted, and when and where it ran."""

    rows: list[Row]
    interrupted: bool
    started: str
    elapsed_s: float
    device: str
    verify_samples: int


def _measure(runner: Runner, problems: list[Problem]) -> tuple[list[Row], bool]:
    """Every row, and whether the run was interrupted (Ctrl-C, or SIGTERM from `timeout` or a scheduler: what was
    measured is kept either way)."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return runner.run(problems), False
    except KeyboardInterrupt:
        return list(getattr(runner, "rows", [])), True
    finally:
        signal.signal(signal.SIGTERM, previous)


def _title(run: _Run, args: argparse.Namespace, out: _Outcome) -> str:
    return (
        f"ucudnn-bench {__version__}: {len(run.problems)} problems ({run.source}"
        f"{f'; interrupted after {len(out.rows)} rows' if out.interrupted else ''})\nops {','.join(run.ops)}, "
        f"limits {','.join(format_size(x) for x in run.limits)}, policies {','.join(run.policies)}, "
        f"{args.backend} backend"
    )


def _cache_line(database: Path) -> str:
    """Where this run's benchmarks and plans went, or why they stayed in memory."""
    runtime = sys.modules.get("ucudnn._runtime")  # the planner's, imported by the preload library when it planned
    not_written = runtime.cache_not_written() if runtime is not None else None
    if not_written:
        return (f"cache: {database} was not written ({not_written}): this run's benchmarks and plans stayed in "
                "memory, so a second run measures them again")  # fmt: skip
    line = (f"cache: {database} (benchmarks and plans; a second run plans from it: `ucudnn db stats --database "
            f"{database}`)")  # fmt: skip
    shared = runtime.shared_benchmarks() if runtime is not None else None
    if shared:  # another process planned the same kernels on this cache at the same time
        line += (f"; {shared.read} benchmark(s) measured by other processes planning the same kernels, "
                 f"{shared.waited_s:.1f} s waited for them")  # fmt: skip
        if shared.taken_over:
            line += f", {shared.taken_over} claimed by them measured here after all (UCUDNN_BENCHMARK_WAIT)"
    return line


def _meta(
    run: _Run, args: argparse.Namespace, argv: Sequence[str] | None, runner: Runner, backend: Backend, out: _Outcome
) -> dict[str, Any]:
    """The JSON file's "meta": the command, the machine and every setting the rows were measured with."""
    return {
        "ucudnn_version": __version__,
        "command": ["ucudnn-bench", *(sys.argv[1:] if argv is None else argv)],
        "started_utc": out.started,
        "elapsed_s": out.elapsed_s,
        "problems": run.source,
        "problem_count": len(run.problems),
        "backend": args.backend,
        "device": out.device,
        "timing": backend.timing,
        "ops": run.ops,
        "limits_bytes": run.limits,
        "policies": run.policies,
        "repeat": run.repeat,
        # "auto": each row's own count (2 to 10, sized for sample_ms); else the fixed count
        "calls_per_sample": "auto" if runner.adaptive else runner.most_calls,
        "sample_ms": args.sample_ms if runner.adaptive else None,
        "warmup": args.warmup,
        "best_of": getattr(backend, "best_of", 1) if backend.timing == "measure" else 1,
        "verify_samples": out.verify_samples,
        "tolerance": args.tolerance if args.tolerance is not None else backend.default_tolerance,
        "database": str(run.database),
        "preload": str(backend.preload_path),
        "python": platform.python_version(),
        "partial": out.interrupted,
    }


def _write(args: argparse.Namespace, rows: Sequence[Row], meta: dict[str, Any], title: str) -> int:
    """The files asked for (--json, --csv, --plot): 0, or 2 when one could not be written."""
    from ucudnn.bench import report

    try:
        if args.json:
            report.write_json(args.json, rows, meta)
            print(f"wrote {args.json} (every row and the summary, JSON)")
        if args.csv:
            report.write_csv(args.csv, rows)
            print(f"wrote {args.csv} (every row, CSV)")
        if args.plot:
            report.write_plot(args.plot, rows, title=title)
            print(f"wrote {args.plot} (speedup chart)")
    except report.PlotUnavailable as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write output: {exc}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_suites:
        print(list_suites())
        return 0
    try:
        run = _check(args)
    except (ProblemError, ConfigError, UsageError, NotACache) as exc:
        return _error(str(exc))
    try:
        _use_database(run)
    except OSError as exc:
        return _error(f"cannot create the directory of --database {run.database}: {exc.strerror or exc}")

    # Imported only now: loading the backends pulls in numpy and the native libraries.
    from ucudnn.bench.backends import BackendUnavailable, open_backend
    from ucudnn.bench.runner import verify_samples

    try:
        samples = verify_samples()
        backend = open_backend(args.backend, host_timing=args.host_timing, preload=args.preload, threads=run.threads,
                               best_of=args.best_of)  # fmt: skip
    except (ConfigError, BackendUnavailable) as exc:
        return _error(str(exc))
    out, runner = _execute(args, run, backend, samples)
    if out.interrupted and not out.rows:
        print("\nucudnn-bench: interrupted before any row was measured; no results written", file=sys.stderr)
        return 130
    if out.interrupted:
        print(f"\nucudnn-bench: interrupted; reporting and writing the {len(out.rows)} rows measured", file=sys.stderr)
    title = _title(run, args, out)
    _print_tables(args, run, out, backend.timing, title)
    status = _write(args, out.rows, _meta(run, args, argv, runner, backend, out), title)
    status = status or (130 if out.interrupted else 0)
    if any(r.status == "ok" and not r.output_match for r in out.rows):
        print("ucudnn-bench: ucudnn's output differed from the undivided output (see above)", file=sys.stderr)
        status = status or 1
    return status


def _execute(args: argparse.Namespace, run: _Run, backend: Backend, samples: int) -> tuple[_Outcome, Runner]:
    """Run every problem on ``backend`` (closed afterwards), as ``args`` and ``run`` say."""
    from ucudnn.bench import report
    from ucudnn.bench.runner import RunConfig, Runner

    cfg = RunConfig(
        ops=run.ops,
        limits=run.limits,
        policies=run.policies,
        repeat=run.repeat,
        warmup=args.warmup,
        tolerance=args.tolerance,
        seed=args.seed,
        calls_per_sample=args.calls_per_sample,  # None: the backend's default (the runner's)
        sample_ms=args.sample_ms,
        verify_samples=samples,
        api=args.api,
    )
    device = backend.device_name()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    runner = Runner(backend, cfg, report.Progress(args.progress))
    try:
        rows, interrupted = _measure(runner, run.problems)
    finally:
        backend.close()
    return _Outcome(rows, interrupted, started, time.monotonic() - t0, device, samples), runner


def _print_tables(args: argparse.Namespace, run: _Run, out: _Outcome, timing: str, title: str) -> None:
    """The rows (-v), the summary and where the cache is."""
    from ucudnn.bench import report

    if args.verbose:
        print(report.detail_table(out.rows))
        print()
    print(report.summary_table(out.rows, title=title, elapsed_s=out.elapsed_s, device=out.device, timing=timing,
                               problems=run.legend))  # fmt: skip
    print(_cache_line(run.database))


if __name__ == "__main__":
    sys.exit(main())
