"""Summary statistics, JSON/CSV/plot output and progress lines, on synthetic rows (no native code)."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path

import pytest

from ucudnn.bench import report
from ucudnn.bench.runner import Row, format_micro_batches


def make_row(problem: str, limit: int, speedup: float, *, status: str = "ok", match: bool = True) -> Row:
    row = Row(
        problem=problem, origin=f"t.csv:{problem}", shape="N8", w=8, h=8, c=1, n=8, k=1, filter_w=3, filter_h=3,
        pad_w=1, pad_h=1, stride_w=1, stride_h=1, op="fwd", limit_bytes=limit, policy="powerOfTwo", status=status,
    )  # fmt: skip
    if status == "ok":
        row.undivided_ms, row.ucudnn_ms, row.speedup = 2.0 * speedup, 2.0, speedup
        row.predicted_speedup, row.output_match, row.planning_ms = speedup, match, 10.0
        row.micro_batches = [{"batch": 4, "algo": 2, "algo_name": "GEMM", "count": 2}]
    else:
        row.reason = "no undivided algorithm fits the limit"
    return row


def test_summary_statistics_and_thresholds() -> None:
    rows = [make_row("a", 1, 2.0), make_row("b", 1, 0.5), make_row("c", 1, 1.0), make_row("d", 1, 0, status="skipped")]
    rows.append(make_row("a", 2, 1.04))
    first, second = report.summarise(rows)
    assert (first.measured, first.skipped) == (3, 1)
    assert math.isclose(first.geomean, 1.0) and first.maximum == 2.0
    assert math.isclose(first.faster, 1 / 3) and math.isclose(first.slower, 1 / 3)
    assert second.faster == 0.0 and second.slower == 0.0  # 1.04x is within the noise band
    text = report.summary_table(rows, title="T", elapsed_s=1.5, device="dev", timing="model")
    assert "> 1.05" in text and "< 0.95" in text and "total run time: 1.5 s" in text
    assert "skipped: d (t.csv:d) fwd: no undivided algorithm fits the limit" in text


def test_rows_that_ran_cudnns_own_call_are_counted_apart_from_slower(tmp_path: Path) -> None:
    """A row whose ucudnn side made cuDNN alone's call measures the machine: it stays in the geomean, is counted
    in ``same`` and listed when below the line, but not as slower; a planned row below the line is slower."""
    tie, split = make_row("tie", 1, 0.9), make_row("split", 1, 0.9)
    tie.micro_batches = [{"batch": 8, "algo": 3, "algo_name": "ALGO_3", "count": 1}]
    tie.own_call, tie.undivided_times_ms, tie.ucudnn_times_ms = True, [1.7, 1.9], [2.0, 2.0]
    [line] = report.summarise([tie, split, make_row("fast", 1, 2.0)])
    assert math.isclose(line.slower, 1 / 3) and (line.own_calls, line.own_calls_below) == (1, 1)
    assert math.isclose(line.geomean, (0.9 * 0.9 * 2.0) ** (1 / 3))
    split.undivided_algo, split.verified, split.runner_up = "FFT_TILING_LONG_NAME", True, True
    split.undivided_times_ms, split.ucudnn_times_ms = [1.8, 1.7], [2.0, 2.0]
    text = report.summary_table([tie, split], title="T", elapsed_s=0, device="d", timing="m")
    same, slow = text.split("below 0.95x with the same call on both sides (not counted as slower):")[1].split(
        "below 0.95x running a plan of ucudnn's (counted as slower):"
    )
    assert "  tie fwd 1B powerOfTwo: 0.90x (repeats 0.85-0.95x): 1 x 8 ALGO_3 on both sides" in same, text
    assert "split" not in same and "tie" not in slow and max(len(x) for x in text.splitlines()) <= report.WIDTH
    # A line past the width is wrapped, not clipped: the check's outcome at its end is what makes the row readable.
    assert (
        "split fwd 1B powerOfTwo: 0.90x (repeats 0.85-0.90x): 2 x 4 GEMM vs cuDNN alone's FFT_TILING_LONG_NAME; "
        "checked against its runner-up: plan kept"
    ) in " ".join(slow.split())
    tie.micro_batches, tie.undivided_algo = [], "ALGO_3"  # passed through
    assert "passed through, ALGO_3 on both sides" in report.summary_table(
        [tie], title="T", elapsed_s=0, device="d", timing="m"
    )
    split.own_call = False
    [line] = report.summarise([split])
    assert line.slower == 1.0 and line.own_calls == 0
    report.write_json(tmp_path / "r.json", [tie, split], {})
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["summary"][0]["own_call_rows"] == 1 and doc["summary"][0]["own_call_rows_below_slower"] == 1
    assert doc["summary"][0]["slower_share"] == 0.5 and doc["rows"][0]["own_call"] is True


def test_the_speedup_is_the_median_of_the_pairs_ratios() -> None:
    """The load drifts between pairs (a second process starts after the first pair): each pair sees one load on
    both sides, so its ratio is 1, but the quotient of the two medians mixes loads and reads 0.75x."""
    row = make_row("drift", 1, 1.0)
    row.undivided_times_ms, row.ucudnn_times_ms = [12.0, 12.0, 16.0], [12.0, 16.0, 16.0]
    assert row.sample_speedups() == [1.0, 0.75, 1.0] and row.paired_speedup() == 1.0
    assert statistics.median(row.undivided_times_ms) / statistics.median(row.ucudnn_times_ms) == 0.75
    row.undivided_times_ms, row.ucudnn_times_ms = [4.0, 2.0], [2.0, 0.0]  # an even count; a zero time is no pair
    assert row.paired_speedup() == 2.0
    assert math.isnan(make_row("unmeasured", 1, 1.0).paired_speedup())


def test_mismatch_is_reported() -> None:
    text = report.summary_table([make_row("a", 1, 1.5, match=False)], title="T", elapsed_s=0, device="d", timing="m")
    assert "OUTPUT MISMATCH: a fwd" in text


def test_json_csv_and_plot(tmp_path: Path) -> None:
    rows = [make_row("a", 1 << 20, 2.0), make_row("a", 8 << 20, 1.0), make_row("b", 1 << 20, 0, status="skipped")]
    report.write_json(tmp_path / "r.json", rows, {"k": "v"})
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["meta"]["k"] == "v" and doc["meta"]["faster_threshold"] == 1.05
    assert len(doc["rows"]) == 3 and doc["rows"][2]["speedup"] is None  # NaN -> null
    assert doc["summary"][0]["max_speedup"] == 2.0
    report.write_csv(tmp_path / "r.csv", rows)
    with (tmp_path / "r.csv").open() as fh:
        got = list(csv.DictReader(fh))
    assert len(got) == 3 and got[0]["micro_batches"] == "2 x 4 GEMM" and got[2]["speedup"] == ""
    assert format_micro_batches(rows[0].micro_batches) == "2 x 4 GEMM"
    pytest.importorskip("matplotlib")
    report.write_plot(tmp_path / "r.png", rows, title="t")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_host_times_and_checks_are_shown() -> None:
    kept, replaced, plain = make_row("a", 1, 2.0), make_row("b", 1, 1.0), make_row("c", 1, 1.0)
    kept.verified = True
    replaced.verified = replaced.rejected_by_measurement = True
    kept.undivided_host_us_per_call, kept.ucudnn_host_us_per_call = 12.5, 3.25
    detail = report.detail_table([kept, replaced, plain])
    times_a, plan_a, _, plan_b, times_c, plan_c = detail.splitlines()[1:7]
    assert "12.5/3.2" in times_a and plan_a == "  plan: 2 x 4 GEMM; cuDNN alone: ; checked: plan kept"
    assert "checked: plan replaced by the undivided choice" in plan_b
    assert "checked" not in plan_c and "-/-" in times_c  # not measured: no host time
    assert "\n".join(detail.splitlines()[7:]).replace("\n", " ") == report.HOST_LEGEND
    assert "before any synchronisation" in report.HOST_LEGEND
    assert max(len(line) for line in detail.splitlines()) <= report.WIDTH
    text = report.summary_table([kept, replaced, plain], title="T", elapsed_s=0, device="d", timing="m")
    assert "checked on real executions: 2 new micro-batched plan(s), 1 replaced" in text
    alone = report.summary_table([plain], title="T", elapsed_s=0, device="d", timing="m")
    assert "checked on real executions" not in alone
    # Plans of one call checked against a runner-up are counted apart, with what replaced them.
    single_kept, single_won = make_row("d", 1, 1.0), make_row("e", 1, 1.1)
    single_kept.verified = single_won.verified = single_won.rejected_by_measurement = True
    single_kept.runner_up = single_won.runner_up = True
    both = report.summary_table([kept, replaced, single_kept, single_won], title="T", elapsed_s=0, device="d",
                                timing="m")  # fmt: skip
    assert (
        "checked on real executions: 2 new micro-batched plan(s), 1 replaced by the undivided choice; 2 plan(s) of "
        "one call against a runner-up, 1 replaced by it (their rows time what won)"
    ) in " ".join(both.split())
    assert max(len(line) for line in both.splitlines()) <= report.WIDTH
    notes = report.detail_table([single_kept, single_won])
    assert "checked against its runner-up: plan kept" in notes and "checked: plan replaced by its runner-up" in notes


def test_progress_modes() -> None:
    out = io.StringIO()
    p = report.Progress("lines", out)
    p(0, 2, "a fwd")
    p(2, 2, "done")
    assert out.getvalue().startswith("ucudnn-bench: [1/2] a fwd")
    assert "done" not in out.getvalue()
    quiet = io.StringIO()
    report.Progress("none", quiet)(0, 1, "x")
    assert quiet.getvalue() == ""
    bar = io.StringIO()
    report.Progress("bar", bar)(1, 2, "b")
    assert "[" in bar.getvalue() and "1/2" in bar.getvalue()


def test_the_spread_over_repeats_is_reported() -> None:
    a, b = make_row("a", 1, 2.0), make_row("b", 1, 2.0)
    # Speedups per repeat: a 2, 4, 1; b 2, 2, 2 -> lowest 1 and 2, highest 4 and 2.
    a.undivided_times_ms, a.ucudnn_times_ms = [4.0, 8.0, 2.0], [2.0, 2.0, 2.0]
    b.undivided_times_ms, b.ucudnn_times_ms = [4.0, 4.0, 4.0], [2.0, 2.0, 2.0]
    assert a.sample_speedups() == [2.0, 4.0, 1.0]
    [line] = report.summarise([a, b])
    assert math.isclose(line.geomean_low, math.sqrt(2)) and math.isclose(line.geomean_high, math.sqrt(8))
    b.undivided_times_ms = [4.0, 8.0, 2.0]  # now both vary alike: 1 and 4 each
    [line] = report.summarise([a, b])
    assert (line.geomean_low, line.geomean_high) == (1.0, 4.0)
    text = report.summary_table([a, b], title="T", elapsed_s=0, device="d", timing="m", problems="suite s: labels")
    assert "1.00-4.00x" in text and "repeats" in text and "suite s: labels" in text
    assert "plan s: planning time" in text and "wrong: outputs that differed" in text
    assert max(len(line) for line in text.splitlines()) <= report.WIDTH
    detail = report.detail_table([a])
    assert "1.00-4.00x" in detail.splitlines()[1]
    unmeasured = make_row("c", 1, 1.0)
    assert unmeasured.sample_speedups() == [] and "1.00x            -" in report.detail_table([unmeasured])


def test_cudnn_version_reads_as_a_release() -> None:
    from ucudnn.cudnn import version_text

    assert version_text(92400) == "9.24.0" and version_text(91901) == "9.19.1" and version_text(8907) == "8.9.7"
