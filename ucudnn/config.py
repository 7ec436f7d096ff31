"""Every ``UCUDNN_*`` environment variable, declared once.

This module is the single declaration: the Python side parses settings with it, the native build generates
the C shim's table from ``VARIABLES`` (so it must import nothing outside the standard library), and the
table of variables in docs/configuration.md is rendered from it (``python -m ucudnn.config --markdown``).
"""

from __future__ import annotations

import enum
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class Kind(enum.Enum):
    SIZE = "size"  # bytes, or a number with a binary unit: 64MiB, 64M, 64MB (all 2^26), 1GiB
    BOOL = "bool"  # 1/0, true/false, yes/no, on/off
    CHOICE = "choice"  # one of `choices` (case-insensitive)
    PATH = "path"  # a file path; empty means unset
    STRING = "string"  # free text, or text matching ``pattern`` when the variable has one
    LIMIT = "size or auto"  # a SIZE, or `auto`: no limit of ucudnn's own (the caller's workspace decides)
    COUNT = "count"  # a non-negative integer
    FRACTION = "fraction"  # a non-negative decimal such as 0.02


@dataclass(frozen=True)
class Var:
    """One configuration variable. ``default`` is the textual default, parsed like a user's value."""

    name: str
    kind: Kind
    default: str
    doc: str
    choices: tuple[str, ...] = ()
    # Who reads it: "shim" (the preload library), "python", "host" (the host backend), in any combination; or
    # "build" alone (the native build, shim/build/native.py).
    readers: tuple[str, ...] = ("shim", "python")
    # STRING only: a POSIX extended regular expression the whole (trimmed) value must match, valid for both
    # Python's re and C's regcomp, and the accepted values in words for the message.
    pattern: str = ""
    expected: str = ""


VARIABLES: tuple[Var, ...] = (
    Var(
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT",
        Kind.LIMIT,
        "auto",
        "`auto`: no cap of ucudnn's own, the framework's workspace decides (Find*Ex and execution: the workspace "
        "passed; Get*_v7/Find*: a Pareto list of plans, fastest first, bounded by what the framework can allocate "
        "when known; graph API: a micro-batched variant offered among the heuristics results where the framework "
        "cannot allocate the first engines' workspace). A size (e.g. 64MiB): a per-kernel cap on every call, as in "
        "the original μ-cuDNN.",
    ),
    Var(
        "UCUDNN_TOTAL_WORKSPACE_SIZE",
        Kind.SIZE,
        "0",
        "Network-wide workspace budget for Workspace Division (0: off, each kernel gets the per-kernel limit). "
        "Kernels join as they first run; the budget is re-divided over all kernels seen so far (exact ILP on "
        "cached benchmarks) and each kernel runs the plan of its share, capped by the workspace its caller offers.",
    ),
    Var(
        "UCUDNN_BATCH_SIZE_POLICY",
        Kind.CHOICE,
        "powerOfTwo",
        "Candidate micro-batch sizes: undivided (N only), powerOfTwo (1, 2, 4, ... and N) or all (1..N).",
        choices=("undivided", "powerOfTwo", "all"),
    ),
    Var(
        "UCUDNN_DETERMINISTIC",
        Kind.BOOL,
        "0",
        "1: plan with deterministic algorithms only, as if every caller asked for determinism.",
    ),
    Var(
        "UCUDNN_TIME_SLACK",
        Kind.FRACTION,
        "0",
        "Fraction of extra time the planner accepts for a plan that needs less workspace (0: always the "
        "fastest plan; 0.25: the least workspace among plans at most 25% slower than the fastest).",
    ),
    Var(
        "UCUDNN_DATABASE",
        Kind.PATH,
        "",
        "SQLite cache of benchmark results and plans (empty: $XDG_CACHE_HOME/ucudnn/cache.sqlite, "
        "else ~/.cache/ucudnn/cache.sqlite).",
    ),
    Var(
        "UCUDNN_DATABASE_JOURNAL",
        Kind.CHOICE,
        "auto",
        "How the cache file is shared between processes. `wal`: SQLite's write-ahead log, readers never wait for a "
        "writer, but every process using the file must be on one host (it shares memory through the `-shm` file). "
        "`delete`: the rollback journal and file locks, for a cache that processes on several hosts share (a "
        "network or cluster file system: multi-node training with the cache in a shared home directory). `auto`: "
        "`delete` where the cache's file system is a network or cluster one (NFS, SMB, Lustre, GPFS, BeeGFS, "
        "CephFS, ...), else `wal`.",
        choices=("auto", "wal", "delete"),
        readers=("python",),
    ),
    Var(
        "UCUDNN_DISABLE",
        Kind.BOOL,
        "0",
        "1: the preload library passes every call through unchanged (still counted in the stats).",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_LOG_LEVEL",
        Kind.CHOICE,
        "warning",
        "Messages on stderr, each prefixed `ucudnn:`, at this level and above.",
        choices=("error", "warning", "info", "debug"),
    ),
    Var(
        "UCUDNN_REAL_LIBCUDNN",
        Kind.PATH,
        "",
        "Path of the real libcudnn to forward to when neither RTLD_NEXT nor an already loaded libcudnn.so.9/.8 "
        "provides it.",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_STATS_FILE",
        Kind.PATH,
        "",
        "When set, the preload library writes a JSON summary of its counters there at process exit (`%p` in the "
        "path: the pid). A process that made no cuDNN call writes its zeros only where no file exists yet.",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_BENCHMARK_DEVICES",
        Kind.STRING,
        "",
        "Comma-separated GPU ordinals (the original's name). ucudnn never sends a thread's benchmarks to another "
        "GPU: they run on the calling thread's device, and a list of more than one device says so once. Instead "
        "the threads of a process that drives several GPUs (one per device) each measure a share of a kernel's "
        "sizes, on their own devices at once, and processes on several GPUs (data-parallel ranks) share theirs "
        "the same way: see `UCUDNN_BENCHMARK_WAIT`.",
        pattern="[0-9]{1,9}( *, *[0-9]{1,9})*",
        expected="comma-separated GPU ordinals, e.g. 0,1,2",
    ),
    Var(
        "UCUDNN_BENCHMARK_WAIT",
        Kind.COUNT,
        "60",
        "Seconds a planner waits for a benchmark another process on the same cache is running. Processes that plan "
        "a kernel at once (data-parallel ranks on identical GPUs) claim its micro-batch sizes in the cache, each "
        "measures the sizes nobody else claimed, and reads the others' runs as they land. A claim older than this, "
        "or whose process has died, is taken over; past it the waiter measures what is missing itself. 0: no "
        "sharing, each process measures every size the cache lacks.",
    ),
    Var(
        "UCUDNN_VERIFY_SAMPLES",
        Kind.COUNT,
        "3",
        "Timed executions per side when a new micro-batched plan is checked against the undivided choice that "
        "fits the same workspace (after one untimed warm-up each; as many more when the pairs of timings disagree; "
        "0: no check, plans are trusted).",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_VERIFY_MARGIN",
        Kind.FRACTION,
        "0.02",
        "A checked micro-batched plan is kept only if the median of its times over the undivided choice's, pair by "
        "pair, is at least this fraction below 1 (and it was faster in every pair, or 4 pairs out of 5 of a "
        "lengthened check); otherwise (a tie or slower) the undivided choice runs from then on. The planner, too, "
        "divides a batch only where the divided plan is predicted at least this much faster.",
        readers=("shim", "python"),
    ),
    Var(
        "UCUDNN_VERIFY_CLOSE",
        Kind.FRACTION,
        "0.1",
        "A new plan of one call is checked too, against the runner-up: the fastest other single call at N that fits "
        "the same workspace (deterministic if asked), when Find timed it within this fraction of the plan's call. "
        "Two such calls are often ranked by noise, and the framework alone may have taken either. The runner-up "
        "replaces the plan only if it beats it as a divided plan must beat the undivided choice "
        "(UCUDNN_VERIFY_MARGIN); the outcome is remembered like a divided plan's. 0: no such checks.",
        readers=("python",),
    ),
    Var(
        "UCUDNN_HOST_DEVICE_MEMORY",
        Kind.SIZE,
        "0",
        "Stand-in for the free device memory where no GPU reports one (the host backend): under `auto` it is what "
        "the framework can allocate (plus a PyTorch allocator's unused cache), the bound of the plans Get*_v7/Find* "
        "list and of the graph path's offers (0: unknown, no bound, no offer).",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_RUN_PID",
        Kind.COUNT,
        "0",
        "Set by `ucudnn run` to the pid of the program it starts: that process warns at exit when no cuDNN "
        "convolution call reached the preload library (0: no process warns).",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_SCRATCH_FROM_FRAMEWORK",
        Kind.BOOL,
        "0",
        "1: where the device has no memory left for a planner benchmark's scratch (the graph path's tensors and "
        "workspaces at a batch size), borrow it from the framework's caching allocator (PyTorch's, or one a C/C++ "
        "host registered with ucudnn_set_framework_allocator), which holds "
        "memory the device no longer shows as free; given back when the benchmark ends. A legacy search that "
        "cudnnFind left short of memory (at a Get*_v7 or Find* query) is made again with Find*Ex on such scratch. "
        "Off until measured on a GPU.",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_HOST_STREAM_CAPTURE",
        Kind.BOOL,
        "0",
        "Host backend only, for tests: 1 makes every stream read as being captured into a CUDA graph where no GPU "
        "answers, so that the preload library behaves as during a real capture (it makes no plan, times no check, "
        "and every call it has no plan for runs as cuDNN alone would).",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_HOST_DRIVER",
        Kind.BOOL,
        "0",
        "Host backend only, for tests: 1 treats a CUDA driver in the process (libcuda.so.1, a test's stand-in) as the "
        "device's, so that the paths the preload library takes on a GPU run on the host backend: CUDA events time "
        "the benchmarks and checks, scratch comes from cuMemAlloc, the free memory from cuMemGetInfo and capture "
        "from cuStreamIsCapturing. Without such a driver it changes nothing.",
        readers=("shim",),
    ),
    Var(
        "UCUDNN_HOST_FIND_MEMORY",
        Kind.STRING,
        "",
        "Host backend only, for tests: the device memory (bytes) Find* may allocate for its own tensors and "
        "workspaces, as on a GPU whose memory the framework holds (tensors that do not fit fail the call; an "
        "algorithm whose workspace does not fit beside them is reported as an allocation failure); the preload "
        "library's graph benchmarks get no more scratch memory than that either. Unset: no bound.",
        readers=("host", "shim"),
        pattern="[0-9]{1,15}",
        expected="a number of bytes (up to 15 digits), e.g. 4194304",
    ),
    Var(
        "UCUDNN_HOST_FIND_SKEW",
        Kind.STRING,
        "",
        "Host backend only, for tests: `<op>:<algo>:<factor>` (op fwd, bwd_data or bwd_filter) makes Find* report "
        "factor x that algorithm's true time, so a plan can look faster than it runs.",
        readers=("host",),
        pattern="(fwd|bwd_data|bwd_filter):[0-9]{1,9}:[0-9]{1,9}(\\.[0-9]{1,9})?",
        expected="<op>:<algo>:<factor> with op fwd, bwd_data or bwd_filter, e.g. bwd_filter:1:0.5",
    ),
    Var(
        "UCUDNN_HOST_INSTANT_TOP",
        Kind.STRING,
        "",
        "Host backend only, for tests: the graph API's INSTANT (and A, B) heuristics answer only the first k engines "
        "of their ranking, as real cuDNN's list can start with engines that all need large workspaces; FALLBACK's "
        "list is unchanged. Unset: every engine.",
        readers=("host",),
        pattern="[1-9][0-9]?",
        expected="a count of engines from 1 to 99, e.g. 1",
    ),
    Var(
        "UCUDNN_HOST_TIMING",
        Kind.CHOICE,
        "measure",
        "Host backend only: `measure` times algorithms for real in Find*; `model` reports deterministic "
        "modelled times (for tests).",
        choices=("measure", "model"),
        readers=("host",),
    ),
    Var(
        "UCUDNN_BUILD_SANITIZE",
        Kind.CHOICE,
        "none",
        "Build only (`pip install`): `undefined` compiles the native libraries with -fsanitize=undefined, each "
        "undefined behaviour then ending the process with a report; `address` with -fsanitize=address,undefined, "
        "each bad memory access too (its runtime must then be first in LD_PRELOAD): for the tests "
        "(docs/testing.md), never for use.",
        choices=("none", "undefined", "address"),
        readers=("build",),
    ),
)

BY_NAME: Mapping[str, Var] = {v.name: v for v in VARIABLES}


class ConfigError(ValueError):
    """A bad value of a UCUDNN_* variable; the message names the variable and what it accepts."""


# Sizes: digits, optionally a point and digits, optionally a unit; blanks around the number and the unit. Every
# unit is binary, whatever its spelling (K, KB, KiB: 1024; M, MB, MiB: 1024^2; G...: 1024^3; T...: 1024^4), case
# does not matter, and a fraction must come to whole bytes. At most MAX_SIZE bytes: a larger size is a typo, and
# it would not survive the planner's arithmetic (exact integers up to 2^53 in floating point) or SQLite's.
_SIZE_RE = re.compile(
    r"[ \t\n\r\f\v]*([0-9]+)(?:\.([0-9]+))?[ \t\n\r\f\v]*([KMGT]?I?B?)[ \t\n\r\f\v]*", re.IGNORECASE | re.ASCII
)
_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    **{
        prefix + suffix: int(1024 ** (power + 1))
        for power, prefix in enumerate("KMGT")
        for suffix in ("", "B", "I", "IB")
        if suffix != "I"
    },
}
MAX_SIZE = 2**53
SIZE_RULE = (
    "bytes or a size with a binary unit (e.g. 67108864, 64MiB, 64M, 64MB: all 2^26 bytes; K, M, G, T: 1024^1..4), "
    "at most 2^53 bytes (8192TiB)"
)
_FRACTION_RE = re.compile(r"[ \t\n\r\f\v]*[0-9]{1,9}(?:\.[0-9]{1,9})?[ \t\n\r\f\v]*")
_COUNT_RE = re.compile(r"[ \t\n\r\f\v]*[0-9]{1,9}[ \t\n\r\f\v]*")
# The blanks C's isspace() knows, so that C and Python trim values alike.
_BLANKS = " \t\n\r\f\v"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_size(text: str, *, name: str = "size") -> int:
    """Parse ``64MiB``, ``64M``, ``64MB``, ``1GiB``, ``1048576`` into bytes: every unit is binary (see SIZE_RULE)."""
    m = _SIZE_RE.fullmatch(text)
    unit = (m.group(3) or "").upper() if m else ""
    if not m or unit not in _UNITS:
        raise ConfigError(f"{name}={text!r}: expected {SIZE_RULE}")
    whole, frac = m.group(1), m.group(2) or ""
    if len(frac) > 18:  # the C parser's bound; no unit needs more digits than that to come to whole bytes
        raise ConfigError(f"{name}={text!r}: expected {SIZE_RULE}")
    scale = _UNITS[unit]
    numerator = int(whole + frac) * scale
    denominator = int(10 ** len(frac))
    if numerator % denominator:
        raise ConfigError(f"{name}={text!r}: not a whole number of bytes")
    value = numerator // denominator
    if value > MAX_SIZE:
        raise ConfigError(f"{name}={text!r}: expected {SIZE_RULE}")
    return value


def parse_fraction(text: str, *, name: str = "value") -> float:
    """Parse a non-negative decimal such as ``0.25`` (digits, optionally a point and digits: the shim's rule)."""
    if not _FRACTION_RE.fullmatch(text):
        raise ConfigError(f"{name}={text!r}: expected a non-negative number such as 0 or 0.25")
    return float(text.strip(_BLANKS))


def parse_count(text: str, *, name: str = "value") -> int:
    """Parse a non-negative integer such as ``3``."""
    if not _COUNT_RE.fullmatch(text):
        raise ConfigError(f"{name}={text!r}: expected a non-negative integer such as 0 or 3")
    return int(text.strip(_BLANKS))


AUTO = "auto"


def format_size(n_bytes: int) -> str:
    """Human-readable binary size: 67108864 -> '64MiB'."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale}{unit}"
    return f"{n_bytes}B"


def is_blank(text: str) -> bool:
    """Empty or only blanks: the variable counts as unset (the same rule for every variable, in C and Python)."""
    return not text.strip(_BLANKS)


def parse(var: Var, text: str) -> int | bool | str | float:
    """Parse one variable's textual value; raises ConfigError naming the variable and the accepted values."""
    if var.kind is Kind.SIZE:
        return parse_size(text, name=var.name)
    if var.kind is Kind.LIMIT:
        if text.strip(_BLANKS).lower() == AUTO:
            return AUTO
        try:
            return parse_size(text, name=var.name)
        except ConfigError:
            raise ConfigError(f"{var.name}={text!r}: expected auto, {SIZE_RULE}") from None
    if var.kind is Kind.COUNT:
        return parse_count(text, name=var.name)
    if var.kind is Kind.FRACTION:
        return parse_fraction(text, name=var.name)
    if var.kind is Kind.BOOL:
        low = text.strip(_BLANKS).lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError(f"{var.name}={text!r}: expected 1 or 0 (also true/false, yes/no, on/off)")
    if var.kind is Kind.CHOICE:
        for choice in var.choices:
            if text.strip(_BLANKS).lower() == choice.lower():
                return choice
        raise ConfigError(f"{var.name}={text!r}: expected one of {', '.join(var.choices)}")
    if is_blank(text):
        return ""  # unset
    if var.pattern and not re.fullmatch(var.pattern, text.strip(_BLANKS)):
        raise ConfigError(f"{var.name}={text!r}: expected {var.expected}")
    return text.strip(_BLANKS) if var.pattern else text


def get(name: str, environ: Mapping[str, str] | None = None) -> int | bool | str | float:
    """The parsed value of variable ``name`` from ``environ`` (default: os.environ), else its default. A blank
    value (empty or only blanks) means unset."""
    var = BY_NAME[name]
    env = os.environ if environ is None else environ
    raw = env.get(name)
    if raw is None or is_blank(raw):
        return parse(var, var.default)
    return parse(var, raw)


def check_environment(environ: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The ``UCUDNN_*`` variables of ``environ`` checked: (a message for every bad value, naming the variable and
    the accepted values; the ``UCUDNN_*`` names that are no variable of ucudnn's)."""
    env = os.environ if environ is None else environ
    bad: list[str] = []
    unknown: list[str] = []
    for name in sorted(k for k in env if k.startswith("UCUDNN_")):
        if name not in BY_NAME:
            unknown.append(name)
            continue
        try:
            get(name, env)
        except ConfigError as exc:
            bad.append(str(exc))
    return bad, unknown


def benchmark_devices(environ: Mapping[str, str] | None = None) -> tuple[int, ...]:
    """UCUDNN_BENCHMARK_DEVICES as GPU ordinals (empty: the caller's device); ConfigError for a bad list."""
    text = str(get("UCUDNN_BENCHMARK_DEVICES", environ))
    return tuple(int(item) for item in text.split(",")) if text else ()


def database_path(environ: Mapping[str, str] | None = None) -> Path:
    """The SQLite cache file: UCUDNN_DATABASE, else the per-user default under the XDG cache directory."""
    env = os.environ if environ is None else environ
    explicit = str(get("UCUDNN_DATABASE", env))
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ucudnn" / "cache.sqlite"


def markdown_table() -> str:
    """The table of variables of docs/configuration.md."""
    rows = ["| variable | kind | default | meaning |", "|---|---|---|---|"]
    for v in VARIABLES:
        kind = v.kind.value if not v.choices else " / ".join(f"`{c}`" for c in v.choices)
        default = f"`{v.default}`" if v.default else "(unset)"
        rows.append(f"| `{v.name}` | {kind} | {default} | {v.doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        print(markdown_table())
    else:
        for v in VARIABLES:
            print(f"{v.name}={get(v.name)!r}")
