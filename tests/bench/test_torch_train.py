"""``ucudnn.bench.torch_train`` without a GPU or torch: options, configurations, the report, its check, and the
worker's loop on a stand-in torch."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from ucudnn.bench import torch_train as tt
from ucudnn.bench import torch_worker as tw


def test_models_option_parses_and_names_itself_on_error() -> None:
    assert tt._parse_models("resnet18:256, resnet50:128") == [("resnet18", 256), ("resnet50", 128)]
    for bad in ("resnet18", "resnet18:0", ":4", "resnet18:x"):
        with pytest.raises(argparse.ArgumentTypeError, match="--models"):
            tt._parse_models(bad)


def test_set_passes_a_checked_setting_to_the_ucudnn_runs_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert tt._setting("UCUDNN_SCRATCH_FROM_FRAMEWORK=1") == ("UCUDNN_SCRATCH_FROM_FRAMEWORK", "1")
    for bad in ("UCUDNN_NOPE=1", "UCUDNN_SCRATCH_FROM_FRAMEWORK", "UCUDNN_SCRATCH_FROM_FRAMEWORK=maybe"):
        with pytest.raises(argparse.ArgumentTypeError, match="--set"):
            tt._setting(bad)
    envs: dict[str, dict[str, str]] = {}

    def fake_run(cmd: list[str], env: dict[str, str], **_kw: Any) -> Any:
        name = "ucudnn" if "ucudnn.cli" in cmd else "torch"
        envs[name] = env
        out = Path(cmd[cmd.index("--out") + 1])
        out.write_text(json.dumps({"ms_per_iter": 1.0, "losses": [1.0], "ballast_mib": 0, "peak_mib": 1}))
        return argparse.Namespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr("ucudnn.bench.torch_train.subprocess.run", fake_run)
    argv = ["--models", "conv3d:2", "--no-pressure", "--set", "UCUDNN_SCRATCH_FROM_FRAMEWORK=1"]
    assert tt.main(argv) == 0
    assert envs["ucudnn"]["UCUDNN_SCRATCH_FROM_FRAMEWORK"] == "1"
    assert "UCUDNN_SCRATCH_FROM_FRAMEWORK" not in envs["torch"]
    assert "settings of every ucudnn run: UCUDNN_SCRATCH_FROM_FRAMEWORK=1" in capsys.readouterr().out


def test_each_ucudnn_run_under_pressure_plans_with_a_cache_of_its_own_and_its_own_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs: dict[str, tuple[str | None, str | None]] = {}  # run's file stem: its database, its scratch setting

    def fake_run(cmd: list[str], env: dict[str, str], **_kw: Any) -> Any:
        out = Path(cmd[cmd.index("--out") + 1])
        database = cmd[cmd.index("--database") + 1] if "--database" in cmd else None
        runs[out.stem] = (database, env.get("UCUDNN_SCRATCH_FROM_FRAMEWORK"))
        out.write_text(json.dumps({"ms_per_iter": 1.0, "losses": [1.0], "ballast_mib": 0, "peak_mib": 1}))
        return argparse.Namespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr("ucudnn.bench.torch_train.subprocess.run", fake_run)
    argv = ["--models", "conv3d:2", "--workspace", "8MiB", "--set", "UCUDNN_SCRATCH_FROM_FRAMEWORK=0"]
    assert tt.main(argv) == 0
    ucudnn = {stem.split("-")[2]: run for stem, run in runs.items() if run[0] is not None}
    assert sorted(ucudnn) == ["cudnn_at_8MiB", "ucudnn", "ucudnn_at_8MiB", "ucudnn_pressure", "ucudnn_pressure_borrow"]
    # A fresh cache for each run under pressure; one for those without, which measure alike.
    assert len({ucudnn[name][0] for name in ("ucudnn", "cudnn_at_8MiB", "ucudnn_at_8MiB")}) == 1
    assert len({ucudnn[name][0] for name in ("ucudnn", "ucudnn_pressure", "ucudnn_pressure_borrow")}) == 3
    scratch = {name: setting for name, (_, setting) in ucudnn.items()}
    assert scratch == {"ucudnn": "0", "cudnn_at_8MiB": "0", "ucudnn_at_8MiB": "0", "ucudnn_pressure": "0",
                       "ucudnn_pressure_borrow": "1"}  # fmt: skip  # its own setting wins
    assert (
        "Settings of a run's own: ucudnn+pressure+borrow: UCUDNN_SCRATCH_FROM_FRAMEWORK=1." in capsys.readouterr().out
    )
    runs.clear()
    shared = tmp_path / "shared.sqlite"
    assert tt.main([*argv, "--database", str(shared)]) == 0
    assert {database for database, _ in runs.values() if database} == {str(shared)}


def test_precision_and_channels_last_reach_every_run_alike(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workers: list[list[str]] = []

    def fake_run(cmd: list[str], env: dict[str, str], **_kw: Any) -> Any:
        worker = cmd[cmd.index("ucudnn.bench.torch_worker") - 2 :]
        workers.append(worker)
        out = Path(cmd[cmd.index("--out") + 1])
        out.write_text(json.dumps({"ms_per_iter": 1.0, "losses": [1.0], "ballast_mib": 0, "peak_mib": 1}))
        return argparse.Namespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr("ucudnn.bench.torch_train.subprocess.run", fake_run)
    assert tt.main(["--models", "conv3d:2", "--precision", "bfloat16", "--channels-last"]) == 0
    assert len(workers) == 5  # torch, ucudnn, both under pressure, and the borrowing one
    for worker in workers:
        assert worker[worker.index("--precision") + 1] == "bfloat16" and "--channels-last" in worker, worker
    assert "every run: bfloat16, channels-last" in capsys.readouterr().out
    workers.clear()
    assert tt.main(["--models", "conv3d:2", "--no-pressure"]) == 0
    assert all(w[w.index("--precision") + 1] == "float32" and "--channels-last" not in w for w in workers)


def test_headroom_error_names_the_option() -> None:
    assert tt._size("512MiB") == 512 << 20
    with pytest.raises(argparse.ArgumentTypeError, match="--headroom"):
        tt._size("lots")


def test_configs_pair_each_run_with_its_baseline() -> None:
    cfgs = {c.name: c for c in tt.configs("64MiB", pressure=True)}
    assert cfgs["torch"].ucudnn is None and cfgs["torch"].baseline is None
    assert cfgs["ucudnn"].ucudnn == () and cfgs["ucudnn"].baseline == "torch"
    assert cfgs["ucudnn+pressure"].pressure and cfgs["ucudnn+pressure"].baseline == "torch+pressure"
    assert cfgs["ucudnn+pressure"].settings == ()
    borrow = cfgs["ucudnn+pressure+borrow"]
    assert borrow.pressure and borrow.ucudnn == () and borrow.baseline == "torch+pressure"
    assert borrow.settings == (("UCUDNN_SCRATCH_FROM_FRAMEWORK", "1"),)
    assert cfgs["cudnn@64MiB"].ucudnn == ("--policy", "undivided", "--workspace", "64MiB")
    assert cfgs["ucudnn@64MiB"].baseline == "cudnn@64MiB"
    assert [c.name for c in tt.configs(None, pressure=False)] == ["torch", "ucudnn"]


def test_report_shows_ratios_loss_differences_and_failures() -> None:
    cfgs = tt.configs(None, pressure=True)
    results = [
        tt.Result("resnet18", 256, "torch", ms_per_iter=60.0, losses=[7.0, 6.5]),
        tt.Result("resnet18", 256, "ucudnn", ms_per_iter=50.0, losses=[7.0, 6.4],
                  stats={"planned": 3, "micro_batches": 40, "rejected_by_measurement": 1}),
        tt.Result("resnet18", 256, "torch+pressure", ms_per_iter=120.0, losses=[7.0, 6.5], left_at_peak_mib=1234.4),
        tt.Result("resnet18", 256, "ucudnn+pressure", error="exit 1: out of memory"),
    ]  # fmt: skip
    text = tt.report(results, cfgs, "legacy", 512 << 20)
    lines = text.splitlines()
    assert "unallocated at its peak: resnet18 N=256 torch+pressure 1,234 MiB" in text
    ucudnn = next(line for line in lines if " ucudnn " in line)
    assert "1.200x torch" in ucudnn and "1.00e-01" in ucudnn and " 40 " in ucudnn
    assert any("ucudnn+pressure" in line and "failed: exit 1: out of memory" in line for line in lines)
    assert "512 MiB" in lines[0] and "legacy" in lines[0]


def test_report_says_what_the_pressure_cost_pytorch_alone() -> None:
    """Item 2's "faster under pressure" needs a pressure that costs PyTorch alone something: the report puts that
    cost beside the comparison, and names a pressure that cost under 2% (as ResNet-18's did on an H200)."""
    cfgs = tt.configs(None, pressure=True)
    results = [
        tt.Result("resnet18", 256, "torch", ms_per_iter=47.96, losses=[7.0]),
        tt.Result("resnet18", 256, "torch+pressure", ms_per_iter=47.20, losses=[7.0]),
        tt.Result("conv3d", 16, "torch", ms_per_iter=100.0, losses=[2.0]),
        tt.Result("conv3d", 16, "torch+pressure", ms_per_iter=125.0, losses=[2.0]),
        tt.Result("resnet50", 128, "torch", ms_per_iter=80.0, losses=[7.0]),
        tt.Result("resnet50", 128, "torch+pressure", error="exit 1: out of memory"),
    ]  # fmt: skip
    line = next(x for x in tt.report(results, cfgs, "legacy", 256 << 20).splitlines() if "cost PyTorch alone" in x)
    assert "resnet18 N=256 47.96 / 47.20 ms = 1.016x (under 2%: no slower algorithm for ucudnn to win back)" in line
    assert line.endswith("; conv3d N=16 100.00 / 125.00 ms = 0.800x")  # a real cost: no note
    assert "resnet50" not in line  # no figure where a side failed
    # No pressure runs, no line.
    no_pressure = [r for r in results if r.config == "torch"]
    assert "cost PyTorch alone" not in tt.report(no_pressure, tt.configs(None, pressure=False), "legacy", 256 << 20)


def test_a_bad_pressure_kind_names_the_option_and_its_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        tt.main(["--pressure", "sideways"])
    err = capsys.readouterr().err
    assert "--pressure" in err and "'backward', 'peak'" in err


def test_report_heading_names_the_pressure_kind() -> None:
    assert "held until backward ends" in tt.report([], tt.configs(None, pressure=True), "legacy", 256 << 20)
    assert "held" not in tt.report([], tt.configs(None, pressure=True), "legacy", 256 << 20, "peak")


def test_a_retry_from_no_headroom_starts_from_a_floor() -> None:
    """``--headroom 0``: doubling nothing would run PyTorch alone three times under the same ballast."""
    cfgs = [c for c in tt.configs(None, pressure=True) if c.pressure]
    rooms: list[int] = []

    def run_one(model: str, batch: int, cfg: tt.Config, headroom: int) -> tt.Result:
        rooms.append(headroom)
        oom = cfg.ucudnn is None and headroom < tt.HEADROOM_RETRY_FLOOR * 2
        return tt.Result(model, batch, cfg.name, ms_per_iter=1.0, losses=[1.0], out_of_memory=oom,
                         error="exit 1: CUDA out of memory" if oom else None)  # fmt: skip

    results, _ = tt.run_configs([("resnet18", 256)], cfgs, 0, run_one)
    floor = tt.HEADROOM_RETRY_FLOOR
    assert rooms == [0, floor, 2 * floor, 2 * floor, 2 * floor]
    assert [r.error for r in results] == [None, None, None]


def test_conv3d_model_is_named_like_a_torchvision_one() -> None:
    assert tt._parse_models("resnet18:256,conv3d:16") == [("resnet18", 256), ("conv3d", 16)]
    assert tw.input_shape("conv3d", 16, 112, 8) == (16, 3, 8, 112, 112)
    assert tw.input_shape("resnet18", 16, 224, 8) == (16, 3, 224, 224)
    with pytest.raises(SystemExit):  # argparse's error exit, before anything runs
        tt.main(["--frames", "0", "--models", "conv3d:2"])


def test_graph_report_shows_the_graph_counters() -> None:
    cfgs = tt.configs(None, pressure=True)
    stats = {"graph_split_plans": 7, "graph_micro_batches": 123, "graph_rejected_by_measurement": 2, "graph_offers": 9}
    results = [
        tt.Result("conv3d", 16, "torch+pressure", ms_per_iter=90.0, losses=[2.3, 2.2]),
        tt.Result("conv3d", 16, "ucudnn+pressure", ms_per_iter=45.0, losses=[2.3, 2.2], stats=stats),
    ]
    lines = tt.report(results, cfgs, "graph", 256 << 20).splitlines()
    assert lines[1].split()[-3] == "offers" and "graph-API" in lines[0]
    row = next(line for line in lines if "ucudnn+pressure" in line)
    assert row.split()[-6:] == ["7", "123", "2", "9", "+0", "0"] and "2.000x" in row
    legacy = tt.report(results, cfgs, "legacy", 256 << 20).splitlines()
    assert "offers" not in legacy[1]
    assert not any("legacy planning's searches" in line for line in legacy)  # no legacy kernel planned
    assert not any("short of memory" in line for line in legacy)
    assert not any("borrowed" in line for line in legacy)

    def line_of(stats: dict[str, int], start: str) -> str:
        results[1].stats = stats
        report = tt.report(results, cfgs, "legacy", 256 << 20).splitlines()
        return next((line for line in report if line.startswith(start)), "")

    searches = (
        "legacy planning's searches (a batch size each; 0: every plan from the cache): conv3d N=16 ucudnn+pressure "
    )
    assert line_of({"planned": 20, "legacy_benchmarks": 0}, searches).endswith(
        " 0 (0 Find*Ex, 0 convolution calls on the caller's own buffers)"
    )
    legacy_stats = {"planned": 20, "legacy_benchmarks": 90, "find_ex_benchmarks": 45, "call_buffer_benchmarks": 6,
                    "benchmarks_short_of_memory": 3, "framework_scratch_allocs": 12, "scratch_searches": 4}  # fmt: skip
    assert line_of(legacy_stats, searches).endswith(
        " 90 (45 Find*Ex, 6 convolution calls on the caller's own buffers; 4 made again on scratch, cudnnFind short)"
    )
    assert line_of(legacy_stats, "planner benchmarks short of memory").endswith("ucudnn+pressure 3")
    assert line_of(legacy_stats, "benchmark scratch borrowed").endswith("ucudnn+pressure 12")
    refused = legacy_stats | {"framework_scratch_refused": 2}
    assert line_of(refused, "benchmark scratch borrowed").endswith("ucudnn+pressure 12 (2 asks refused)")
    results[1].stats = stats
    assert not any("graph benchmarks" in line for line in lines)  # none were made
    assert not any("plans the shim built" in line for line in lines)
    stats |= {
        "graph_benchmarks": 40,
        "graph_benchmarks_reused": 520,
        "graph_benchmarks_over_limit": 12,
        "graph_builds": 96,
        "graph_build_ns": 2_340_000_000,
    }
    lines = tt.report(results, cfgs, "graph", 256 << 20).splitlines()
    assert any(line.endswith("conv3d N=16 ucudnn+pressure 40 measured, 520 reused, 12 over the limit (built, not "
                             "timed)") for line in lines), lines  # fmt: skip
    assert any(line.endswith("built (benchmarks, micro-batches, probes): conv3d N=16 ucudnn+pressure 96 in 2.3 s")
               for line in lines), lines  # fmt: skip


def test_limit_report_shows_both_peaks_and_plans_left_over_the_limit() -> None:
    """Under an explicit limit the report prints each side's peak allocation (on an H200 the baseline's plans ran
    over 64 MiB unseen: 5,890 MiB against 3,464) and the graph plans the shim could not bring within it."""
    cfgs = tt.configs("64MiB", pressure=False)
    results = [
        tt.Result("resnet18", 128, "torch", ms_per_iter=24.5, losses=[7.0, 4.9], peak_mib=5886.7),
        tt.Result("resnet18", 128, "cudnn@64MiB", ms_per_iter=25.4, losses=[7.0, 4.9], peak_mib=5890.2,
                  stats={"graph_over_limit": 276}),
        tt.Result("resnet18", 128, "ucudnn@64MiB", ms_per_iter=26.4, losses=[7.0, 4.9], peak_mib=3463.7,
                  stats={"graph_over_limit": 0}),
    ]  # fmt: skip
    lines = tt.report(results, cfgs, "graph", 256 << 20).splitlines()
    peak = (
        "peak memory allocated under the limit: resnet18 N=128 cudnn@64MiB 5,890 MiB; "
        "resnet18 N=128 ucudnn@64MiB 3,464 MiB"
    )
    assert peak in lines, lines
    assert (
        "graph plans over the limit run as built (no engine cuDNN lists fits it): resnet18 N=128 cudnn@64MiB 276"
        in lines
    )
    no_limit = tt.report(results[:1], tt.configs(None, pressure=False), "graph", 256 << 20)
    assert "peak memory" not in no_limit and "over the limit" not in no_limit


def test_failures_name_what_broke_the_run() -> None:
    ok = {"calls": 10, "graph_conv_plans": 5}
    results = [
        tt.Result("resnet18", 32, "torch", ms_per_iter=5.0, losses=[7.0, 6.5, 6.0]),
        tt.Result("resnet18", 32, "ucudnn", ms_per_iter=5.0, losses=[7.0, 6.51, 6.01], stats=ok),
        tt.Result("resnet18", 32, "torch+pressure", ms_per_iter=5.0, losses=[7.0, 6.5, 6.0]),
        tt.Result("resnet18", 32, "ucudnn+pressure", ms_per_iter=5.0, losses=[7.0, 6.5, 6.9], stats=ok),
    ]
    assert tt.failures(results[:2], "legacy") == []
    bad = tt.failures(results, "legacy")
    assert bad == ["resnet18 N=32 ucudnn+pressure: loss 6.9 at iteration 2, PyTorch alone 6"]
    unseen = [results[0], tt.Result("resnet18", 32, "ucudnn", ms_per_iter=5.0, losses=[7.0, 6.5, 6.0],
                                    stats={"calls": 0, "graph_conv_plans": 3})]  # fmt: skip
    assert tt.failures(unseen, "graph") == []
    assert "saw no convolution on the legacy path (calls = 0)" in tt.failures(unseen, "legacy")[0]
    failed = [results[0], tt.Result("resnet18", 32, "ucudnn", error="exit 1: boom")]
    assert tt.failures(failed, "legacy") == ["resnet18 N=32 ucudnn: exit 1: boom"]


def test_configs_option_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        tt.main(["--configs", "torch,ucudnn@8MiB", "--models", "resnet18:2"])
    err = capsys.readouterr().err
    assert "--configs: ucudnn@8MiB is not one of torch, ucudnn, torch+pressure, ucudnn+pressure" in err


def test_report_shows_settling() -> None:
    cfgs = tt.configs(None, pressure=False)
    results = [
        tt.Result("resnet18", 256, "torch", ms_per_iter=60.0, losses=[7.0, 6.5]),
        tt.Result("resnet18", 256, "ucudnn", ms_per_iter=50.0, losses=[7.0, 6.4], stats={"planned": 3},
                  settle_iters=9, checks_open=1),
    ]  # fmt: skip
    lines = tt.report(results, cfgs, "legacy", 256 << 20).splitlines()
    assert lines[1].split()[-2:] == ["+warm", "open"]
    assert next(line for line in lines if " ucudnn " in line).split()[-2:] == ["+9", "1"]
    assert next(line for line in lines if " torch " in line).split()[-1] == "6.50000"


def test_exit_summary_is_the_shims_line() -> None:
    stderr = (
        "ucudnn: planning 3 kernel(s) took a while\n"
        "ucudnn: 8 kernel(s), 32 convolution call(s), 432 cuDNN call(s) in all: 8 micro-batched\n"
        "Traceback? no, just a program's own last words\n"
    )
    assert tt.exit_summary(stderr).startswith("ucudnn: 8 kernel(s), 32 convolution call(s)")
    assert tt.exit_summary("nothing from the shim\n") == ""


def test_pytorch_alone_out_of_memory_under_pressure_raises_the_headroom_of_both_sides() -> None:
    cfgs = tt.configs(None, pressure=True)
    calls: list[tuple[str, int]] = []
    survives = {"resnet18": 1024 << 20, "conv3d": 0}  # the headroom PyTorch alone needs under pressure

    def run_one(model: str, batch: int, cfg: tt.Config, headroom: int) -> tt.Result:
        calls.append((f"{model}/{cfg.name}", headroom >> 20))
        oom = cfg.pressure and cfg.ucudnn is None and headroom < survives[model]
        r = tt.Result(model, batch, cfg.name, ms_per_iter=1.0, losses=[1.0],
                      headroom_mib=headroom / (1 << 20) if cfg.pressure else None)  # fmt: skip
        if oom:
            r.error, r.out_of_memory = "exit 1: torch.OutOfMemoryError: CUDA out of memory", True
        return r

    results, interrupted = tt.run_configs([("resnet18", 256), ("conv3d", 16)], cfgs, 256 << 20, run_one)
    assert not interrupted
    assert calls == [
        ("resnet18/torch", 256), ("resnet18/ucudnn", 256), ("resnet18/torch+pressure", 256),
        ("resnet18/torch+pressure", 512), ("resnet18/torch+pressure", 1024), ("resnet18/ucudnn+pressure", 1024),
        ("resnet18/ucudnn+pressure+borrow", 1024), ("conv3d/torch", 256), ("conv3d/ucudnn", 256),
        ("conv3d/torch+pressure", 256), ("conv3d/ucudnn+pressure", 256), ("conv3d/ucudnn+pressure+borrow", 256),
    ]  # fmt: skip
    assert [r.error for r in results] == [None] * 10
    report = tt.report(results, cfgs, "legacy", 256 << 20)
    assert "headroom raised after PyTorch alone ran out of memory under pressure: resnet18 N=256 1,024 MiB" in report
    # Twice at most; a ucudnn run out of memory is reported, never run again.
    survives["resnet18"] = 4096 << 20
    calls.clear()
    results, _ = tt.run_configs([("resnet18", 256)], cfgs, 256 << 20, run_one)
    assert [c for c in calls if "pressure" in c[0]] == [("resnet18/torch+pressure", h) for h in (256, 512, 1024)] + [
        ("resnet18/ucudnn+pressure", 1024),
        ("resnet18/ucudnn+pressure+borrow", 1024),
    ]
    assert results[2].out_of_memory and results[2].error

    def ucudnn_oom(model: str, batch: int, cfg: tt.Config, headroom: int) -> tt.Result:
        calls.append((cfg.name, headroom >> 20))
        return tt.Result(model, batch, cfg.name, error="exit 1: CUDA out of memory", out_of_memory=True)

    calls.clear()
    tt.run_configs([("resnet18", 256)], [c for c in cfgs if c.name == "ucudnn+pressure"], 256 << 20, ucudnn_oom)
    assert calls == [("ucudnn+pressure", 256)]


def test_an_interrupt_keeps_the_runs_that_finished_and_the_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A time box's SIGINT (the GPU acceptance boxes every step) reaches the run under way: the runs that finished
    are reported and written, and the exit status says it was interrupted."""
    cfgs = tt.configs(None, pressure=True)

    def run_one(model: str, batch: int, cfg: tt.Config, headroom: int) -> tt.Result:
        if cfg.name == "torch+pressure":
            raise KeyboardInterrupt
        return tt.Result(
            model, batch, cfg.name, ms_per_iter=2.0, losses=[1.0], stats={"calls": 1} if cfg.ucudnn else {}
        )

    results, interrupted = tt.run_configs([("resnet18", 8)], cfgs, 256 << 20, run_one)
    assert interrupted and [r.config for r in results] == ["torch", "ucudnn"]

    def fake_run_one(model: str, batch: int, cfg: tt.Config, args: Any, workdir: Path, env: Any, room: int) -> Any:
        return run_one(model, batch, cfg, room)

    monkeypatch.setattr(tt, "_run_one", fake_run_one)
    out = tmp_path / "r.json"
    assert tt.main(["--models", "resnet18:8", "--json", str(out)]) == 130
    printed = capsys.readouterr().out
    assert "resnet18      8 ucudnn" in printed and "INTERRUPTED after 2 of 5 runs" in printed
    assert [r["config"] for r in json.loads(out.read_text())] == ["torch", "ucudnn"]
