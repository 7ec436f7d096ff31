"""Output of ``ucudnn-bench``: progress on stderr, the summary table, JSON, CSV and the speedup plot."""

from __future__ import annotations

import csv
import json
import math
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ucudnn.bench.runner import Row, format_micro_batches
from ucudnn.config import format_size

FASTER = 1.05  # a problem counts as faster when speedup > FASTER
SLOWER = 0.95  # ... and as slower when speedup < SLOWER (measurement noise lies between)


class Progress:
    """A one-line bar on a terminal; one plain line per step otherwise (logs); nothing when disabled."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "lines"
        self.mode = mode
        self.start = time.monotonic()

    def __call__(self, done: int, total: int, text: str) -> None:
        if self.mode == "none":
            return
        elapsed = time.monotonic() - self.start
        if self.mode == "lines":
            if text != "done":
                print(f"ucudnn-bench: [{done + 1}/{total}] {text} ({elapsed:.0f}s)", file=self.stream, flush=True)
            return
        width = 30
        filled = int(width * done / total) if total else width
        eta = f", ~{elapsed / done * (total - done):.0f}s left" if done else ""
        line = f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:.0f}s{eta} {text}"
        print(f"{line[:119]:<119}", end="" if done < total else "\n", file=self.stream, flush=True)


@dataclass(frozen=True)
class SummaryLine:
    limit_bytes: int
    policy: str
    measured: int
    skipped: int
    geomean: float
    maximum: float
    faster: float  # share of measured rows with speedup > FASTER
    slower: float  # share with speedup < SLOWER among the rows that ran a call of ucudnn's own (not own_call)
    predicted_geomean: float
    mismatches: int
    planning_ms: float
    # The geomean over rows of each row's lowest single-repeat speedup, and of its highest: the band the geomean
    # moves in between repeats on this machine (the run-to-run noise).
    geomean_low: float = math.nan
    geomean_high: float = math.nan
    # Rows whose ucudnn side ran cuDNN alone's own call (Row.own_call): in the geomean, not in ``slower``; how many
    # of them came out below SLOWER (the machine's noise: the two sides made the same call).
    own_calls: int = 0
    own_calls_below: int = 0


def _geomean(xs: Sequence[float]) -> float:
    good = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in good) / len(good)) if good else math.nan


def repeat_band(rows: Sequence[Row]) -> tuple[float, float]:
    """The geomean over ``rows`` of each row's lowest single-repeat speedup, and of its highest."""
    bands = [_spread(r.sample_speedups()) for r in rows]
    return _geomean([low for low, _ in bands]), _geomean([high for _, high in bands])


def _spread(values: Sequence[float]) -> tuple[float, float]:
    good = [v for v in values if math.isfinite(v)]
    return (min(good), max(good)) if good else (math.nan, math.nan)


def _range_text(low: float, high: float) -> str:
    return f"{low:.2f}-{high:.2f}x" if math.isfinite(low) and math.isfinite(high) else "-"


def summarise(rows: Sequence[Row]) -> list[SummaryLine]:
    keys: list[tuple[int, str]] = []
    for r in rows:
        if (r.limit_bytes, r.policy) not in keys:
            keys.append((r.limit_bytes, r.policy))
    out: list[SummaryLine] = []
    for limit, policy in keys:
        group = [r for r in rows if r.limit_bytes == limit and r.policy == policy]
        ok = [r for r in group if r.status == "ok" and math.isfinite(r.speedup)]
        speedups = [r.speedup for r in ok]
        n = len(ok)
        low, high = repeat_band(ok)
        out.append(
            SummaryLine(
                limit_bytes=limit,
                policy=policy,
                measured=n,
                skipped=len(group) - n,
                geomean=_geomean(speedups),
                maximum=max(speedups) if speedups else math.nan,
                faster=sum(s > FASTER for s in speedups) / n if n else math.nan,
                slower=sum(r.speedup < SLOWER for r in ok if not r.own_call) / n if n else math.nan,
                predicted_geomean=_geomean([r.predicted_speedup for r in ok]),
                mismatches=sum(not r.output_match for r in ok),
                planning_ms=sum(r.planning_ms for r in ok if math.isfinite(r.planning_ms)),
                geomean_low=low,
                geomean_high=high,
                own_calls=sum(r.own_call for r in ok),
                own_calls_below=sum(r.own_call and r.speedup < SLOWER for r in ok),
            )
        )
    return out


def _fmt(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "-"


WIDTH = 120  # every line of the tables fits in this many columns

SUMMARY_LEGEND = (
    "columns: rows measured | skip: not run (reasons below) | geomean, max: speedup = undivided cuDNN under the limit",
    "/ ucudnn, the median over the repeats of each pair's ratio | repeats: geomean of each row's lowest - highest",
    f"single-repeat speedup | faster, slower: rows with speedup > {FASTER}, < {SLOWER} (slower: only rows that ran a",
    "plan of ucudnn's) | same: rows where ucudnn ran cuDNN alone's own call (1 x N, the same algorithm: a ratio of",
    "the machine's noise) | pred.gm: geomean predicted from Find times | wrong: outputs that differed from cuDNN's |",
    "plan s: planning time (benchmarks into the cache), not in the times",
)


def _row_label(r: Row) -> str:
    """A summary line's row: its problem, op, limit and policy, its speedup and the spread of its repeats."""
    spread = _range_text(*_spread(r.sample_speedups()))
    return f"{r.problem} {r.op} {format_size(r.limit_bytes)} {r.policy}: {r.speedup:.2f}x (repeats {spread})"


def _clipped(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 3] + "..."


def _own_call_text(r: Row) -> str:
    if r.micro_batches:
        return f"{format_micro_batches(r.micro_batches)} on both sides"
    return f"passed through, {r.undivided_algo} on both sides"


def summary_table(
    rows: Sequence[Row], *, title: str, elapsed_s: float, device: str, timing: str, problems: str = ""
) -> str:
    """The summary; ``problems`` says what the problem labels mean (a built-in suite's description)."""
    lines = [
        *title.splitlines(),
        *textwrap.wrap(problems, WIDTH, subsequent_indent="  "),
        f"device: {device}; timing: {timing}",
        "",
    ]
    header = (
        f"{'limit':>8} {'policy':<11} {'rows':>5} {'skip':>5} {'geomean':>8} {'max':>7} {'repeats':>12} "
        f"{'faster':>7} {'slower':>7} {'same':>5} {'pred.gm':>8} {'wrong':>6} {'plan s':>7}"
    )
    lines += [header, "-" * len(header)]
    for s in summarise(rows):
        spread = _range_text(s.geomean_low, s.geomean_high)
        lines.append(
            f"{format_size(s.limit_bytes):>8} {s.policy:<11} {s.measured:>5} {s.skipped:>5} "
            f"{_fmt(s.geomean, '.3f'):>7}x {_fmt(s.maximum, '.2f'):>6}x {spread:>12} "
            f"{_fmt(100 * s.faster, '.0f'):>6}% {_fmt(100 * s.slower, '.0f'):>6}% {s.own_calls:>5} "
            f"{_fmt(s.predicted_geomean, '.3f'):>7}x {s.mismatches:>6} {s.planning_ms / 1e3:>7.2f}"
        )
    lines += SUMMARY_LEGEND
    skipped = [r for r in rows if r.status != "ok"]
    if skipped:
        lines.append("")
        seen: set[tuple[str, str, str]] = set()
        for r in skipped:
            key = (r.origin, r.op, r.reason)
            if key not in seen:
                seen.add(key)
                lines.append(f"skipped: {r.problem} ({r.origin}) {r.op}: {r.reason}")
    ties = [r for r in rows if r.status == "ok" and r.own_call and r.speedup < SLOWER]
    if ties:
        lines.append("")
        lines.append(f"below {SLOWER}x with the same call on both sides (not counted as slower):")
        lines += [f"  {_row_label(r)}: {_own_call_text(r)}" for r in ties]
    slow = [r for r in rows if r.status == "ok" and not r.own_call and r.speedup < SLOWER]
    if slow:
        lines.append("")
        lines.append(f"below {SLOWER}x running a plan of ucudnn's (counted as slower):")
        for r in slow:  # wrapped, not clipped: the check's outcome ends the line
            text = f"{_row_label(r)}: {format_micro_batches(r.micro_batches)} vs cuDNN alone's {r.undivided_algo}"
            lines += textwrap.wrap(text + _check_note(r), WIDTH, initial_indent="  ", subsequent_indent="    ")
    checked = [r for r in rows if r.status == "ok" and r.verified]
    if checked:
        divided = [r for r in checked if not r.runner_up]
        single = [r for r in checked if r.runner_up]
        replaced = sum(r.rejected_by_measurement for r in divided)
        text = f"checked on real executions: {len(divided)} new micro-batched plan(s), {replaced} replaced by the "
        text += "undivided choice"
        if single:
            won = sum(r.rejected_by_measurement for r in single)
            text += f"; {len(single)} plan(s) of one call against a runner-up, {won} replaced by it"
        lines.append("")
        lines += textwrap.wrap(text + " (their rows time what won)", WIDTH, subsequent_indent="  ")
    wrong = [r for r in rows if r.status == "ok" and not r.output_match]
    for r in wrong:
        lines.append(
            f"OUTPUT MISMATCH: {r.problem} {r.op} {format_size(r.limit_bytes)} {r.policy}: "
            f"rel error {r.rel_error:.3g} > {r.tolerance:g}"
        )
    lines.append("")
    lines.append(f"total run time: {elapsed_s:.1f} s ({len(rows)} rows)")
    return "\n".join(lines)


HOST_LEGEND = (
    "host us: host wall time issuing one call (a sample's back-to-back calls, before any synchronisation, / calls; "
    "median), undivided / ucudnn; on the host backend calls are synchronous, so it includes the convolution. "
    "speedup: the median of the pairs' ratios (not the quotient of the two medians before it). "
    "repeats: lowest-highest speedup of single repeats. plan: count x micro-batch size algorithm, then cuDNN "
    "alone's algorithm under the limit"
)


def _check_note(r: Row) -> str:
    if r.rejected_by_measurement:
        return "; checked: plan replaced by " + ("its runner-up" if r.runner_up else "the undivided choice")
    if r.verified:
        return "; checked against its runner-up: plan kept" if r.runner_up else "; checked: plan kept"
    return ""


def detail_table(rows: Sequence[Row]) -> str:
    """Every measured row, two lines each (``--verbose``): the times, then the plan."""
    lines = [
        f"{'problem':<20} {'op':<10} {'limit':>6} {'policy':<10} {'undiv ms':>9} {'ucudnn ms':>9} {'pred ms':>9} "
        f"{'speedup':>7} {'repeats':>12} {'host us':>17}"
    ]
    for r in rows:
        if r.status != "ok":
            continue
        host = f"{_fmt(r.undivided_host_us_per_call, '.1f')}/{_fmt(r.ucudnn_host_us_per_call, '.1f')}"
        spread = _range_text(*_spread(r.sample_speedups()))
        lines.append(
            f"{r.problem[:20]:<20} {r.op:<10} {format_size(r.limit_bytes):>6} {r.policy[:10]:<10} "
            f"{r.undivided_ms:>9.3f} {r.ucudnn_ms:>9.3f} {r.predicted_ms:>9.3f} {r.speedup:>6.2f}x {spread:>12} "
            f"{host:>17}"
        )
        lines.append(_clipped(f"  plan: {format_micro_batches(r.micro_batches)}; cuDNN alone: {r.undivided_algo}"
                              f"{_check_note(r)}"))  # fmt: skip
    lines += textwrap.wrap(HOST_LEGEND, WIDTH)
    return "\n".join(lines)


def write_json(path: Path, rows: Sequence[Row], meta: dict[str, Any]) -> None:
    summary = [
        {
            "limit_bytes": s.limit_bytes,
            "policy": s.policy,
            "measured": s.measured,
            "skipped": s.skipped,
            "geomean_speedup": s.geomean,
            "max_speedup": s.maximum,
            "faster_share": s.faster,
            "slower_share": s.slower,
            "own_call_rows": s.own_calls,
            "own_call_rows_below_slower": s.own_calls_below,
            "predicted_geomean_speedup": s.predicted_geomean,
            "output_mismatches": s.mismatches,
            "planning_ms": s.planning_ms,
            "repeat_geomean_min": s.geomean_low,
            "repeat_geomean_max": s.geomean_high,
        }
        for s in summarise(rows)
    ]
    doc = {
        "meta": {
            **meta,
            "faster_threshold": FASTER,
            "slower_threshold": SLOWER,
            "slower_share_of": "rows that ran a plan of ucudnn's (own_call false); own_call rows counted apart",
        },
        "summary": summary,
        "rows": [r.to_dict() for r in rows],
    }
    # NaN is not JSON: unmeasured values become null.
    path.write_text(json.dumps(_nan_to_none(doc), indent=2) + "\n", encoding="utf-8")


def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    return x


def write_csv(path: Path, rows: Sequence[Row]) -> None:
    if not rows:
        path.write_text("", encoding="utf-8")
        return
    fields = [k for k in rows[0].to_dict() if k not in ("micro_batches", "ucudnn_times_ms", "undivided_times_ms")]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([*fields, "micro_batches", "ucudnn_times_ms", "undivided_times_ms"])
        for r in rows:
            d = r.to_dict()
            writer.writerow(
                [
                    *("" if isinstance(d[f], float) and not math.isfinite(d[f]) else d[f] for f in fields),
                    format_micro_batches(r.micro_batches),
                    " ".join(f"{t:.6g}" for t in r.ucudnn_times_ms),
                    " ".join(f"{t:.6g}" for t in r.undivided_times_ms),
                ]
            )


class PlotUnavailable(RuntimeError):
    pass


PLOT_NEEDS = "--plot needs matplotlib: pip install 'ucudnn[plot]' (or pip install matplotlib)"


def plot_unavailable() -> str | None:
    """Why ``--plot`` cannot work here (checked before a run, so that it does not fail at the end), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return PLOT_NEEDS
    return None


def write_plot(path: Path, rows: Sequence[Row], *, title: str) -> None:
    """Bars of speedup per problem (x) and limit (one colour each), like the μ-cuDNN README's figure.

    One panel per op x policy present; the dashed line is 1.0x (no change).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(PLOT_NEEDS) from None
    ok = [r for r in rows if r.status == "ok" and math.isfinite(r.speedup)]
    panels: list[tuple[str, str]] = []
    for r in ok:
        if (r.op, r.policy) not in panels:
            panels.append((r.op, r.policy))
    if not panels:
        raise PlotUnavailable("--plot: no measured rows to plot")
    limits = sorted({r.limit_bytes for r in ok})
    # Labels repeat (DeepBench names whole groups "Resnet"), so problems are told apart by origin.
    problems: list[str] = []
    ticks: list[str] = []
    for r in ok:
        if r.origin not in problems:
            problems.append(r.origin)
            ticks.append(f"{r.problem} {r.filter_h}x{r.filter_w} C{r.c}>{r.k} {r.h}x{r.w}")
    width_in = max(8.0, 0.35 * len(problems) * max(1, len(limits)) / 2 + 3)
    fig, axes = plt.subplots(len(panels), 1, figsize=(min(width_in, 40.0), 1.0 + 4.6 * len(panels)), squeeze=False)
    bar = 0.8 / len(limits)
    for ax, (op, policy) in zip(axes[:, 0], panels, strict=True):
        for i, limit in enumerate(limits):
            xs: list[float] = []
            ys: list[float] = []
            for r in ok:
                if r.op == op and r.policy == policy and r.limit_bytes == limit:
                    xs.append(problems.index(r.origin) + (i - (len(limits) - 1) / 2) * bar)
                    ys.append(r.speedup)
            ax.bar(xs, ys, width=bar, label=format_size(limit))
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
        ax.set_ylabel("speedup (x)")
        ax.set_title(f"{op}, policy {policy}")
        ax.set_xticks(range(len(problems)))
        ax.set_xticklabels(ticks, rotation=60, ha="right", fontsize=7)
        ax.legend(title="workspace limit", fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(textwrap.fill(title, 110), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
