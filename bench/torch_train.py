"""PyTorch training, side by side: PyTorch alone against the same training under ``ucudnn run``.

    python -m ucudnn.bench.torch_train [--models resnet18:256,resnet50:128,conv3d:16] [--api legacy|graph] [--json F]

For each model (a torchvision model by name, or ``conv3d``: a small video/medical-style 3-D convolution network of
ours, on clips of ``--frames`` frames; random weights, synthetic data, SGD, the same seeds in every run) it runs,
each in a process of its own (``ucudnn.bench.torch_worker``, which trains and times one run):

- ``torch``: PyTorch alone;
- ``ucudnn``: the same under ``ucudnn run`` with its defaults (the framework's own workspace);
- ``torch+pressure`` and ``ucudnn+pressure``: the same two, with a ballast tensor holding most of the GPU's
  free memory so that only ``--headroom`` (default 256 MiB) is left beyond what the model itself needs at the
  step's busiest moment, as backward starts -- the memory pressure under which frameworks fall back to slow
  algorithms. Under ``--pressure backward`` (the default) every tensor autograd saves is also held until backward
  ends, so that backward (two thirds of the convolution work) runs as short of memory as that moment, as in a
  program whose memory stays at its peak through backward; the step's needs are measured on one forward and
  backward pass, and the ballast leaves 128 MiB more for what loads outside the allocator (cuDNN's kernels at
  their first use). Under ``--pressure peak`` only the busiest moment is short (the needs estimated from one forward
  pass), and workspaces elsewhere in the step find more: on an H200, ResNet-18 at N = 256 lost nothing to it, its
  convolutions that want large workspaces running early in forward and late in backward. Either sizing pass runs
  without cuDNN, so that no convolution algorithm is chosen before the ballast exists. The report says what each run
  left unallocated at its own peak, and what the pressure cost PyTorch alone: where that is under 2%, there was no
  slower algorithm for ucudnn to win back. Where PyTorch alone runs out of memory under the ballast (what loads
  outside the allocator is not measured), the headroom is doubled (from 64 MiB where it was 0), at most twice, for
  every pressure run of the model, and the report says so; a ucudnn run that runs out of memory is a failure, never
  run again. ``ucudnn+pressure+borrow`` is ``ucudnn+pressure`` with ``UCUDNN_SCRATCH_FROM_FRAMEWORK=1`` (planner
  benchmarks short of device memory borrow scratch from PyTorch's caching allocator; off by default until measured
  on a GPU), beside it against the same ``torch+pressure``.
  An interrupt (Ctrl-C, a time box's SIGINT) stops the runs; the report of those that finished is still printed
  (exit status 130);
- with ``--workspace L``: ``cudnn@L`` (ucudnn ``--policy undivided --workspace L``: the best single algorithm
  within L, what cuDNN alone does under that limit) and ``ucudnn@L`` (ucudnn's plans within L).

``--precision bfloat16`` trains under PyTorch's mixed precision (``torch.autocast``: the convolutions in bfloat16,
as most training on recent GPUs runs), and ``--channels-last`` with weights and input channels-last (NHWC); every
run of the comparison alike.

The environment's ``UCUDNN_*`` variables are not passed on; ``--set UCUDNN_NAME=VALUE`` gives every ucudnn run a
setting (e.g. ``UCUDNN_SCRATCH_FROM_FRAMEWORK=1``; a configuration's own settings win), and the report says so.
Each ucudnn run under pressure plans with a cache of its own, as a first run under that pressure would, whatever ran
before it; the runs without pressure share one, as they measure alike. ``--database F`` shares one among all (then
``ucudnn+pressure``'s plans would be made from what ``ucudnn`` measured without pressure).

It prints the median milliseconds per training iteration after warm-up (CUDA events around each iteration), the
ratio to the run it is compared with (PyTorch alone under the same memory conditions; ``cudnn@L`` for
``ucudnn@L``), the first and last loss of every run, and the shim's counters. ``--api legacy`` (the default)
runs every configuration on PyTorch's legacy cuDNN path (``TORCH_CUDNN_V8_API_DISABLED=1``); ``--api graph`` runs
PyTorch's default graph-API path, where under memory pressure ucudnn's defaults offer micro-batched variants of the
engines that do not fit among the heuristics results PyTorch reads (its counters: offers, split plans, micro-batch
calls, plans the check replaced).

Needs a CUDA GPU, torch and torchvision. Warm-up covers ucudnn's planning; a ucudnn run then adds warm-up steps
(forward and backward, the weights unchanged, at most ``--settle``) while its checks of new plans on real executions
are running (a check takes 2 x (UCUDNN_VERIFY_SAMPLES + 1) executions of its kernel, one per step), so that both
sides are timed in their steady state; the report says how many it added (+warm) and how many checks were still
running when timing began (open). The script exits 1, naming why, when a configuration failed, when a ucudnn run
saw no convolution on the path asked for, or when its losses left PyTorch alone's beyond rounding.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ucudnn import config
from ucudnn.bench.torch_worker import CONV3D, PRECISIONS, PRESSURE_KINDS

_MIB = 1 << 20


@dataclass(frozen=True)
class Config:
    """One configuration of a model's training: its name, ``ucudnn run`` options (None: PyTorch alone), whether
    a ballast tensor applies memory pressure, the configuration its time is compared with, and ``UCUDNN_*``
    settings of its own (over ``--set``'s)."""

    name: str
    ucudnn: tuple[str, ...] | None
    pressure: bool = False
    baseline: str | None = None
    limit: str | None = None  # the explicit per-kernel limit it runs under (--workspace)
    settings: tuple[tuple[str, str], ...] = ()


# Benchmark scratch borrowed from PyTorch's allocator (off by default until measured on a GPU): side by side under
# pressure, so that one run shows whether it matters.
BORROW = (("UCUDNN_SCRATCH_FROM_FRAMEWORK", "1"),)


@dataclass
class Result:
    model: str
    batch: int
    config: str
    ms_per_iter: float = float("nan")
    losses: list[float] = field(default_factory=list)
    ballast_mib: float = 0.0
    peak_mib: float = 0.0
    wall_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    left_at_peak_mib: float | None = None  # under pressure: what the run left unallocated at its peak
    headroom_mib: float | None = None  # under pressure: what the ballast left beyond the model's estimated needs
    out_of_memory: bool = False  # the run failed for lack of GPU memory
    settle_iters: int = 0
    checks_open: int = 0
    summary: str = ""  # a ucudnn run's exit summary line, as the shim printed it
    error: str | None = None


_PATHS = {"legacy": "legacy cuDNN path (TORCH_CUDNN_V8_API_DISABLED=1)", "graph": "PyTorch's default graph-API path"}
# The shim's counters each path's report shows: kernels or plans micro-batched, micro-batch calls, plans the check on
# real executions replaced by the undivided call, and (graph path) variants offered in heuristics results.
_COUNTERS = {
    "legacy": ("planned", "micro_batches", "rejected_by_measurement", None),
    "graph": ("graph_split_plans", "graph_micro_batches", "graph_rejected_by_measurement", "graph_offers"),
}
# How far a ucudnn run's losses may drift from PyTorch alone's: algorithms round differently (TF32 included), and
# training diverges only by rounding.
LOSS_REL, LOSS_ABS = 2e-2, 2e-2


def configs(workspace: str | None, pressure: bool) -> list[Config]:
    out = [Config("torch", None), Config("ucudnn", (), baseline="torch")]
    if pressure:
        out += [
            Config("torch+pressure", None, pressure=True),
            Config("ucudnn+pressure", (), pressure=True, baseline="torch+pressure"),
            Config("ucudnn+pressure+borrow", (), pressure=True, baseline="torch+pressure", settings=BORROW),
        ]
    if workspace:
        out += [
            Config(
                f"cudnn@{workspace}",
                ("--policy", "undivided", "--workspace", workspace),
                baseline="torch",
                limit=workspace,
            ),
            Config(f"ucudnn@{workspace}", ("--workspace", workspace), baseline=f"cudnn@{workspace}", limit=workspace),
        ]
    return out


def exit_summary(stderr: str) -> str:
    """The preload library's exit summary line in a run's standard error ("" if none)."""
    lines = reversed(stderr.splitlines())
    return next((ln for ln in lines if ln.startswith("ucudnn: ") and " kernel(s), " in ln), "")


# Under pressure, how many times PyTorch alone running out of memory doubles the headroom of a model's runs: the
# estimate of its needs misses what loads lazily, and the comparison needs a ballast PyTorch alone survives.
HEADROOM_RETRIES = 2
# The headroom a retry starts from where none was asked for (``--headroom 0``): doubling nothing leaves nothing.
HEADROOM_RETRY_FLOOR = 64 * _MIB
# Below this loss to pressure (PyTorch alone's time under it against without), the pressure did not make PyTorch
# fall back to slower algorithms in any way that matters, and ucudnn has nothing to win back: the report says so.
PRESSURE_COST_SMALL = 0.98
_OOM_MARKS = ("OutOfMemoryError", "CUDA out of memory", "CUDA error: out of memory")


def run_configs(
    models: Sequence[tuple[str, int]],
    cfgs: Sequence[Config],
    headroom: int,
    run_one: Callable[[str, int, Config, int], Result],
    retries: int = HEADROOM_RETRIES,
) -> tuple[list[Result], bool]:
    """Every configuration of every model, in order, through ``run_one(model, batch, cfg, headroom)``, and whether
    an interrupt (Ctrl-C, or a time box's SIGINT) stopped them: the results of the runs that finished come back
    either way, so that a report can still be made. Where PyTorch alone under pressure runs out of memory, the
    headroom is doubled and it runs again (at most ``retries`` times); the model's later pressure runs get the
    headroom it ran with, so both sides of the comparison carry the same ballast. A ucudnn run that runs out of
    memory is never run again: that is a failure to report."""
    results: list[Result] = []
    try:
        for model, batch in models:
            room = headroom
            for cfg in cfgs:
                r = run_one(model, batch, cfg, room)
                tries = 0
                while cfg.pressure and cfg.ucudnn is None and r.out_of_memory and tries < retries:
                    room, tries = max(2 * room, HEADROOM_RETRY_FLOOR), tries + 1
                    print(f"{model} N={batch} {cfg.name}: out of memory; again with {room // _MIB} MiB of headroom",
                          file=sys.stderr, flush=True)  # fmt: skip
                    r = run_one(model, batch, cfg, room)
                results.append(r)
    except KeyboardInterrupt:
        return results, True
    return results, False


def _run_one(
    model: str, batch: int, cfg: Config, args: argparse.Namespace, workdir: Path, env: dict[str, str], headroom: int
) -> Result:
    res = Result(model, batch, cfg.name)
    if cfg.pressure:
        res.headroom_mib = headroom / _MIB
    tag = f"{model}-{batch}-{cfg.name}-{headroom}".replace("@", "_at_").replace("+", "_")
    out = workdir / f"{tag}.json"
    stats_file = workdir / f"{tag}.stats.json"
    worker = [
        sys.executable, "-m", "ucudnn.bench.torch_worker", "--model", model, "--batch", str(batch),
        "--image", str(args.image), "--frames", str(args.frames), "--iters", str(args.iters), "--warmup",
        str(args.warmup), "--settle", str(args.settle), "--out", str(out),
    ]  # fmt: skip
    if not args.cudnn_benchmark:
        worker.append("--no-cudnn-benchmark")
    worker += ["--precision", args.precision] + (["--channels-last"] if args.channels_last else [])
    if cfg.pressure:
        worker += ["--headroom-bytes", str(headroom), "--pressure", args.pressure]
    child_env = dict(env)
    if args.api == "legacy":
        child_env["TORCH_CUDNN_V8_API_DISABLED"] = "1"
    else:
        child_env.pop("TORCH_CUDNN_V8_API_DISABLED", None)
    cmd = worker
    if cfg.ucudnn is not None:
        child_env.update(dict(args.set) | dict(cfg.settings))
        # Unless one was named: under pressure a cache of its own, so that it plans as a first run under that pressure
        # would; the runs without pressure measure alike and share one (cudnn@L's rows at N serve ucudnn@L).
        database = args.database or workdir / (f"{tag}.sqlite" if cfg.pressure else "cache.sqlite")
        cmd = [
            sys.executable, "-m", "ucudnn.cli", "run", *cfg.ucudnn, "--torch-api", args.api, "--database",
            str(database), "--stats-file", str(stats_file), "--", *worker,
        ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True, timeout=args.timeout)
    res.wall_s = time.monotonic() - t0
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        res.error = f"exit {proc.returncode}: " + " | ".join(tail)
        res.out_of_memory = any(mark in (proc.stderr or "") for mark in _OOM_MARKS)
        return res
    data = json.loads(out.read_text())
    res.ms_per_iter = float(data["ms_per_iter"])
    res.losses = [float(v) for v in data["losses"]]
    res.ballast_mib = float(data["ballast_mib"])
    res.peak_mib = float(data["peak_mib"])
    left = data.get("left_at_peak_mib")
    res.left_at_peak_mib = None if left is None else float(left)
    res.settle_iters = int(data.get("settle_iters", 0))
    res.checks_open = int(data.get("checks_open", 0))
    if stats_file.exists():
        res.stats = json.loads(stats_file.read_text())
    res.summary = exit_summary(proc.stderr)
    return res


def pressure_cost(results: Sequence[Result]) -> str:
    """Per model, PyTorch alone's time without pressure against under it: whether the pressure made PyTorch fall
    back to slower algorithms at all. Where it cost less than 2%, "faster than PyTorch alone under pressure" has
    nothing to be measured on, and the line says so (on an H200, ResNet-18 at N = 256 lost nothing to 256 MiB of
    headroom at its peak: its convolutions that want large workspaces run early in forward and late in backward,
    away from the peak)."""
    by = {(r.model, r.batch, r.config): r for r in results if not r.error and r.ms_per_iter > 0}
    parts = []
    for (model, batch, name), pressed in by.items():
        alone = by.get((model, batch, "torch"))
        if name != "torch+pressure" or alone is None:
            continue
        ratio = alone.ms_per_iter / pressed.ms_per_iter
        note = " (under 2%: no slower algorithm for ucudnn to win back)" if ratio >= PRESSURE_COST_SMALL else ""
        parts.append(f"{model} N={batch} {alone.ms_per_iter:.2f} / {pressed.ms_per_iter:.2f} ms = {ratio:.3f}x{note}")
    return "; ".join(parts)


_PRESSURE_WORDS = {
    "backward": "at its peak, the tensors autograd saved held until backward ends",
    "peak": "at its peak",
}


def report(
    results: Sequence[Result], cfgs: Sequence[Config], api: str, headroom: int, pressure: str = "backward"
) -> str:
    lines = _table(results, cfgs, api, headroom, pressure)
    lines += _pressure_lines(results, headroom) + _limit_lines(results, cfgs) + _planning_lines(results)
    lines.append(_legend(api, cfgs))
    return "\n".join(lines)


def _table(results: Sequence[Result], cfgs: Sequence[Config], api: str, headroom: int, pressure: str) -> list[str]:
    """The heading and a row per run: its time, the ratio to its baseline, losses, the shim's counters."""
    lines = [
        f"PyTorch training, {_PATHS[api]}; ms per iteration (median after warm-up); "
        f"pressure: {headroom // _MIB} MiB left beyond the model's own needs {_PRESSURE_WORDS[pressure]}",
        f"{'model':<10} {'N':>4} {'config':<22} {'ms/iter':>9} {'vs':>16} {'loss first':>11} {'loss last':>11} "
        f"{'|dloss| max':>11} {'plans':>6} {'mbatch':>7} {'rejected':>8}"
        + (f" {'offers':>6}" if api == "graph" else "")
        + f" {'+warm':>5} {'open':>4}",
    ]
    plans, mbatch, rejected, offers = _COUNTERS[api]
    by = {(r.model, r.batch, r.config): r for r in results}
    for r in results:
        if r.error:
            lines.append(f"{r.model:<10} {r.batch:>4} {r.config:<22} failed: {r.error}")
            continue
        base_name = next((c.baseline for c in cfgs if c.name == r.config), None)
        base = by.get((r.model, r.batch, base_name)) if base_name else None
        vs = ""
        if base and not base.error and r.ms_per_iter > 0:
            vs = f"{base.ms_per_iter / r.ms_per_iter:.3f}x {base_name}"[:16]
        ref = by.get((r.model, r.batch, "torch"))
        dloss = ""
        if ref and not ref.error and ref is not r and len(ref.losses) == len(r.losses):
            dloss = f"{max(abs(a - b) for a, b in zip(ref.losses, r.losses, strict=True)):.2e}"
        s = r.stats
        lines.append(
            f"{r.model:<10} {r.batch:>4} {r.config:<22} {r.ms_per_iter:>9.2f} {vs:>16} {r.losses[0]:>11.5f} "
            f"{r.losses[-1]:>11.5f} {dloss:>11} {s.get(plans, ''):>6} {s.get(mbatch, ''):>7} {s.get(rejected, ''):>8}"
            + (f" {s.get(offers, ''):>6}" if offers else "")
            + (f" {'+' + str(r.settle_iters):>5} {r.checks_open:>4}" if s else f" {'':>5} {'':>4}")
        )
    return lines


def _per_run(heading: str, results: Sequence[Result], figure: Callable[[Result], str | None]) -> list[str]:
    """One report line: ``heading``, then each run that did not fail and has a figure, named, with that figure."""
    parts = [f"{r.model} N={r.batch} {r.config} {f}" for r in results if not r.error and (f := figure(r))]
    return [heading + "; ".join(parts)] if parts else []


def _counter(key: str) -> Callable[[Result], str | None]:
    """A run's shim counter ``key`` as a figure, where it is not zero."""
    return lambda r: str(r.stats[key]) if r.stats.get(key) else None


def _pressure_lines(results: Sequence[Result], headroom: int) -> list[str]:
    """Under pressure: headroom raised for PyTorch alone, what the pressure cost it, what each run left."""
    lines = []
    raised = sorted({(r.model, r.batch, r.headroom_mib) for r in results
                     if r.headroom_mib is not None and r.headroom_mib * _MIB > headroom and not r.error})  # fmt: skip
    if raised:
        lines.append(
            "headroom raised after PyTorch alone ran out of memory under pressure: "
            + "; ".join(f"{m} N={b} {h:,.0f} MiB" for m, b, h in raised)
        )
    cost = pressure_cost(results)
    if cost:
        lines.append("what the pressure cost PyTorch alone (its time without / under it): " + cost)
    return lines + _per_run(
        "under pressure, memory the run left unallocated at its peak: ",
        results,
        lambda r: f"{r.left_at_peak_mib:,.0f} MiB" if r.left_at_peak_mib is not None else None,
    )


def _limit_lines(results: Sequence[Result], cfgs: Sequence[Config]) -> list[str]:
    """Under an explicit limit, both sides' peaks and the graph plans over it."""
    # Under an explicit limit both sides' peak allocations say whether the limit held: on an H200 a baseline whose
    # plans ran over it (no engine within it among those the planner read) peaked at 5,890 MiB against 3,464.
    limited = {c.name for c in cfgs if c.limit}
    return _per_run(
        "peak memory allocated under the limit: ",
        results,
        lambda r: f"{r.peak_mib:,.0f} MiB" if r.config in limited else None,
    ) + _per_run(
        "graph plans over the limit run as built (no engine cuDNN lists fits it): ",
        results,
        _counter("graph_over_limit"),
    )


def _benchmarked(r: Result) -> str | None:
    s = r.stats
    if not s.get("graph_benchmarks"):
        return None
    return (f"{s['graph_benchmarks']} measured, {s.get('graph_benchmarks_reused', 0)} reused, "
            f"{s.get('graph_benchmarks_over_limit', 0)} over the limit (built, not timed)")  # fmt: skip


def _searched(r: Result) -> str | None:
    s = r.stats
    if not (s.get("legacy_benchmarks") or s.get("planned")):  # no legacy kernel planned: the graph path's run
        return None
    text = (f"{s.get('legacy_benchmarks', 0)} ({s.get('find_ex_benchmarks', 0)} Find*Ex, "
            f"{s.get('call_buffer_benchmarks', 0)} convolution calls on the caller's own buffers")  # fmt: skip
    if s.get("scratch_searches"):
        text += f"; {s['scratch_searches']} made again on scratch, cudnnFind short"
    return text + ")"


def _borrowed(r: Result) -> str | None:
    lent, refused = r.stats.get("framework_scratch_allocs", 0), r.stats.get("framework_scratch_refused", 0)
    if not (lent or refused):
        return None
    return f"{lent}" + (f" ({refused} asks refused)" if refused else "")


def _built(r: Result) -> str | None:
    s = r.stats
    return f"{s['graph_builds']} in {s.get('graph_build_ns', 0) / 1e9:.1f} s" if s.get("graph_builds") else None


def _planning_lines(results: Sequence[Result]) -> list[str]:
    """What the ucudnn runs' planning measured, and on what: graph benchmarks, legacy searches (on whose buffers),
    benchmarks short of memory, scratch borrowed, plans the shim built."""
    return [
        *_per_run(
            "graph benchmarks (engines built and timed at a batch size for the planner): ", results, _benchmarked
        ),
        *_per_run("legacy planning's searches (a batch size each; 0: every plan from the cache): ", results, _searched),
        *_per_run(
            "planner benchmarks short of memory (a batch size each: its tensors, or a workspace within the limit, "
            "could not be had): ",
            results,
            _counter("benchmarks_short_of_memory"),
        ),
        *_per_run(
            "benchmark scratch borrowed from PyTorch's allocator (UCUDNN_SCRATCH_FROM_FRAMEWORK; buffers): ",
            results,
            _borrowed,
        ),
        *_per_run("graph plans the shim built (benchmarks, micro-batches, probes): ", results, _built),
    ]


def _legend(api: str, cfgs: Sequence[Config]) -> str:
    own = "; ".join(f"{c.name}: {', '.join(f'{k}={v}' for k, v in c.settings)}" for c in cfgs if c.settings)
    return (
        "vs: the compared run's time / this run's (>1: faster). |dloss| max: largest difference from PyTorch alone "
        "over all iterations' losses. plans / mbatch / rejected: the shim's counters ("
        + ("kernels planned" if api == "legacy" else "graph plans micro-batched")
        + ", micro-batch calls, plans the check on real executions replaced by the undivided call)"
        + ("; offers: micro-batched variants offered in heuristics results" if api == "graph" else "")
        + ". +warm: warm-up steps (forward and backward, weights unchanged) a ucudnn run added until its checks of new "
        "plans ended, so that both sides are timed in their steady state; open: checks still running when timing "
        "began." + (f" Settings of a run's own: {own}." if own else "")
    )


def failures(results: Sequence[Result], api: str) -> list[str]:
    """What makes the run fail: a configuration that failed, a ucudnn run that did not see PyTorch's convolutions
    on the path asked for, or whose losses left PyTorch alone's beyond rounding (LOSS_REL, LOSS_ABS)."""
    out = []
    by = {(r.model, r.batch, r.config): r for r in results}
    seen = "calls" if api == "legacy" else "graph_conv_plans"
    for r in results:
        name = f"{r.model} N={r.batch} {r.config}"
        if r.error:
            out.append(f"{name}: {r.error}")
            continue
        if not r.stats:
            continue  # PyTorch alone
        if int(r.stats.get(seen, 0)) <= 0:
            out.append(f"{name}: the shim saw no convolution on the {api} path ({seen} = {r.stats.get(seen, 0)})")
        ref = by.get((r.model, r.batch, "torch"))
        if ref is None or ref.error or len(ref.losses) != len(r.losses):
            continue
        for i, (a, b) in enumerate(zip(ref.losses, r.losses, strict=True)):
            if abs(a - b) > LOSS_ABS + LOSS_REL * abs(a):
                out.append(f"{name}: loss {b:.6g} at iteration {i}, PyTorch alone {a:.6g}")
                break
    return out


def _parse_models(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        name, sep, batch = item.strip().partition(":")
        if not sep or not name or not batch.isdigit() or int(batch) < 1:
            raise argparse.ArgumentTypeError(f"--models: expected MODEL:BATCH[,...] (e.g. resnet18:256), got {item!r}")
        out.append((name, int(batch)))
    return out


def _setting(text: str) -> tuple[str, str]:
    """``--set UCUDNN_NAME=VALUE``: a known variable with a value it accepts."""
    name, sep, value = text.partition("=")
    var = config.BY_NAME.get(name.strip())
    if not sep or var is None:
        raise argparse.ArgumentTypeError(f"--set: expected UCUDNN_NAME=VALUE with a ucudnn variable, got {text!r}")
    try:
        config.parse(var, value)
    except config.ConfigError as exc:
        raise argparse.ArgumentTypeError(f"--set: {exc}") from None
    return var.name, value


def _size(text: str) -> int:
    try:
        return config.parse_size(text, name="--headroom")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ucudnn.bench.torch_train", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--models",
        type=_parse_models,
        default=_parse_models("resnet18:256,resnet50:128,conv3d:16"),
        help=f"MODEL:BATCH[,...]: torchvision model names, or {CONV3D} (the 3-D convolution network)",
    )
    p.add_argument("--frames", type=int, default=16, help="frames per clip of the conv3d model (default 16)")
    p.add_argument("--api", choices=("legacy", "graph"), default="legacy")
    p.add_argument("--workspace", metavar="L", help="also compare cuDNN alone and ucudnn under this per-kernel cap")
    p.add_argument("--no-pressure", action="store_true", help="skip the two runs under memory pressure")
    p.add_argument("--configs", help="run only these configurations (comma-separated names, as the report shows)")
    p.add_argument("--headroom", type=_size, default=256 * _MIB, help="memory left under pressure (default 256MiB)")
    p.add_argument("--pressure", choices=PRESSURE_KINDS, default="backward",
                   help="backward (default): the headroom is left at the step's peak and the tensors autograd saved "
                        "are held until backward ends, so backward runs as short of memory as the peak; peak: "
                        "the headroom is left at the peak only")  # fmt: skip
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help="float32 (default), or bfloat16: PyTorch's mixed precision (torch.autocast), the "
                        "convolutions in bfloat16")  # fmt: skip
    p.add_argument(
        "--channels-last",
        action="store_true",
        help="weights and input channels-last (NHWC), as PyTorch's channels_last training runs",
    )
    p.add_argument("--image", type=int, default=224, help="image (and clip frame) side (default 224)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument(
        "--settle",
        type=int,
        default=40,
        metavar="K",
        help="under ucudnn, at most K more warm-up steps while checks of new plans run (default 40)",
    )
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false",
                   help="torch.backends.cudnn.benchmark=False (default True)")  # fmt: skip
    p.add_argument("--database", type=Path,
                   help="one ucudnn cache for every ucudnn run (default: fresh ones, one per run under "
                        "pressure)")  # fmt: skip
    p.add_argument("--set", type=_setting, action="append", default=[], metavar="UCUDNN_NAME=VALUE",
                   help="a setting for every ucudnn run (repeatable; the environment's UCUDNN_* are not passed on), "
                        "e.g. UCUDNN_SCRATCH_FROM_FRAMEWORK=1")  # fmt: skip
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--json", type=Path, help="write the results there")
    args = p.parse_args(argv)
    if args.warmup < 0 or args.iters < 1 or args.frames < 1 or args.settle < 0:
        p.error("--warmup and --settle must be >= 0, --iters and --frames >= 1")
    cfgs = configs(args.workspace, not args.no_pressure)
    if args.configs:
        wanted = [c.strip() for c in args.configs.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in {cfg.name for cfg in cfgs}]
        if unknown or not wanted:
            p.error(f"--configs: {', '.join(unknown) or 'none given'} is not one of {', '.join(c.name for c in cfgs)}")
        cfgs = [c for c in cfgs if c.name in wanted]
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
    with tempfile.TemporaryDirectory(prefix="ucudnn-torch-") as tmp:
        workdir = Path(tmp)

        def one(model: str, batch: int, cfg: Config, headroom: int) -> Result:
            r = _run_one(model, batch, cfg, args, workdir, env, headroom)
            state = f"{r.ms_per_iter:.2f} ms/iter" if not r.error else r.error
            print(f"{model} N={batch} {cfg.name}: {state} ({r.wall_s:.0f} s)", file=sys.stderr, flush=True)
            return r

        results, interrupted = run_configs(args.models, cfgs, args.headroom, one)
    print(report(results, cfgs, args.api, args.headroom, args.pressure))
    if args.precision != "float32" or args.channels_last:
        print(f"every run: {args.precision}" + (", channels-last" if args.channels_last else ""))
    if args.set:
        print("settings of every ucudnn run: " + ", ".join(f"{name}={value}" for name, value in args.set))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
        print(f"wrote {args.json}")
    bad = failures(results, args.api)
    for line in bad:
        print(f"FAILED: {line}")
    if interrupted:
        done = len(results)
        print(f"INTERRUPTED after {done} of {len(args.models) * len(cfgs)} runs: the report covers those", flush=True)
        return 130
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
