"""The CPU demo of issue 17: PyTorch's graph path under memory pressure, alone and under ucudnn's defaults.

    python -m tests.frontend.pressure [--capacity 448KiB] [--shape 32,64,64,13] [--calls 24] [--json FILE]

Runs the real-client program ``torch_v0`` (the real cudnn_frontend in PyTorch 2.11's order, built from the wheels'
headers as the tests build it) on the host backend: fprop, dgrad and wgrad of one layer (N, C, K, HxW, 3x3,
padding 1; by default AlexNet's conv5 at 64 channels), in both PyTorch modes, with a simulated caching allocator of
``--capacity`` bytes (pressure) and of 1 GiB (none). Each configuration runs alone and under the preload library
with no limit of its own (ucudnn's defaults; UCUDNN_HOST_DEVICE_MEMORY tells it the allocator's capacity, as a
GPU's free memory would), one after the other in this process, on the same data. Times are the host's wall clock
(one BLAS thread), the median of the calls after the first 12 (the variant's check on real executions is over by
then), the median of ``--repeat`` runs made alternately alone and under ucudnn; a shared machine moves them, so
the table gives the ratio of each pair measured side by side. "Max rel. diff" compares the two outputs (different
engines round differently; micro-batched wgrad accumulates in its own order).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ucudnn import _paths
from ucudnn.config import parse_size

from . import _build
from .conftest import Inputs, Problem

OPS = ("fprop", "dgrad", "wgrad")
ROOMY = 1 << 30
SETTLED = 12  # calls before the steady state: the first run, 2 as offered, the check's 8


@dataclass
class Row:
    op: str
    benchmark: int
    capacity: int
    alone_ms: float
    alone_engine: str
    ucudnn_ms: float
    ucudnn_engine: str
    ucudnn_runs: str  # what ran in the steady state (see runs())
    max_rel_diff: float

    @property
    def ratio(self) -> float:
        return self.alone_ms / self.ucudnn_ms if self.ucudnn_ms > 0 else float("nan")


def run_once(exe: Path, p: Problem, inputs: Inputs, folder: Path, capacity: int, benchmark: int, calls: int,
             preload: bool) -> tuple[dict[str, Any], dict[str, Any], np.ndarray]:  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    inputs.write(folder, p)
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "LD_PRELOAD"}
    env |= {"LD_LIBRARY_PATH": str(_paths.LIB_DIR), "OPENBLAS_NUM_THREADS": "1",
            "UCUDNN_DATABASE": str(folder / "cache.sqlite"), "UCUDNN_LOG_LEVEL": "info"}  # fmt: skip
    if preload:
        env |= {"LD_PRELOAD": str(_paths.PRELOAD), "UCUDNN_STATS_FILE": str(folder / "stats.json"),
                "UCUDNN_HOST_DEVICE_MEMORY": str(capacity)}  # fmt: skip
    cmd = [str(exe), *p.args(), "--data", str(folder), "--capacity", str(capacity), "--benchmark", str(benchmark),
           "--calls", str(calls)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"torch_v0 failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    stats = json.loads((folder / "stats.json").read_text()) if preload else {}
    stats["log"] = proc.stderr  # the shim's info lines: the variant's plan and the check's verdict
    out = np.fromfile(folder / "out.bin", dtype=np.float32)
    return json.loads(lines[-1]), stats, out


def steady(report: dict[str, Any]) -> float:
    times = report["call_ms"][SETTLED - 1 :]
    return float(statistics.median(times))


def runs(report: dict[str, Any], stats: dict[str, Any]) -> str:
    """What ran in the steady state, from the shim's info lines: "as built", "K x B, engine E" (the variant PyTorch
    kept, its parts), or "engine E after the check" (the undivided rival the variant's check kept). PyTorch kept the
    variant when the plan it kept has the variant's engine: under pressure that engine's own configuration never
    fits."""
    log = stats.get("log", "")
    plan = re.search(r"engine (\d+), \d+ bytes\): offer plan of (\d+) part\(s\), first (\d+) x engine (\d+)", log)
    kept = re.search(r"eng(\d+)", report["engine"])
    if not plan or not kept or kept[1] != plan[1]:
        return "as built"
    rival = re.search(r"undivided engine (\d+) [^:]*: the undivided engine from now on", log)
    return f"engine {rival[1]} after the check" if rival else f"{plan[2]} x {plan[3]}, engine {plan[4]}"


def measure(exe: Path, shape: dict[str, Any], capacity: int, calls: int, repeat: int, work: Path) -> list[Row]:
    """Alone and under ucudnn, alternately `repeat` times each: the median of the runs' steady-state medians."""
    rows = []
    for op in OPS:
        p = Problem(op, **shape)
        inputs = Inputs.make(p)
        for benchmark in (0, 1):
            for cap in (capacity, ROOMY):
                times: dict[bool, list[float]] = {False: [], True: []}
                for i in range(repeat):
                    for preload in (False, True):
                        folder = work / f"{op}-{benchmark}-{cap}-{i}-{int(preload)}"
                        report, stats, out = run_once(exe, p, inputs, folder, cap, benchmark, calls, preload)
                        times[preload].append(steady(report))
                        if preload:
                            under, under_stats, out_u = report, stats, out
                        else:
                            alone, out_a = report, out
                diff = float(np.max(np.abs(out_u - out_a) / np.maximum(1.0, np.abs(out_a))))
                ran = runs(under, under_stats)
                rows.append(Row(op, benchmark, cap, statistics.median(times[False]), alone["engine"],
                                statistics.median(times[True]), under["engine"], ran, diff))  # fmt: skip
    return rows


def table(rows: list[Row], capacity: int) -> str:
    lines = ["| mode | memory | op | PyTorch alone ms (engine) | ucudnn defaults ms (engine) | ratio | max rel. diff |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for benchmark in (0, 1):
        for cap in (capacity, ROOMY):
            mode = f"benchmark={'True' if benchmark else 'False'}"
            memory = f"{cap // 1024} KiB" if cap != ROOMY else "1 GiB (none)"
            part = [r for r in rows if r.benchmark == benchmark and r.capacity == cap]
            for r in part:
                lines.append(
                    f"| {mode} | {memory} | {r.op} | {r.alone_ms:.2f} ({r.alone_engine}) | "
                    f"{r.ucudnn_ms:.2f} ({r.ucudnn_engine}, {r.ucudnn_runs}) | {r.ratio:.2f}x | "
                    f"{r.max_rel_diff:.1e} |"
                )
            a, u = sum(r.alone_ms for r in part), sum(r.ucudnn_ms for r in part)
            lines.append(f"| {mode} | {memory} | **sum** | {a:.2f} | {u:.2f} | {a / u:.2f}x | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.frontend.pressure", description=__doc__.split("\n\n")[0])
    ap.add_argument("--capacity", default="448KiB", help="the simulated allocator's capacity under pressure")
    ap.add_argument("--shape", default="32,64,64,13", help="N,C,K,HxW of the 3x3 convolution (padding 1)")
    ap.add_argument("--calls", type=int, default=24, help=f"calls per run (the steady state: after {SETTLED})")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each program, alone and under ucudnn alternately")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.calls <= SETTLED:
        ap.error(f"--calls must exceed {SETTLED}")
    n, c, k, hw = (int(v) for v in args.shape.split(","))
    capacity = parse_size(args.capacity)
    try:
        programs = _build.build(_paths.HOST_CUDNN)
    except _build.Unavailable as exc:
        raise SystemExit(f"cannot build the real-client programs: {exc}") from None
    with tempfile.TemporaryDirectory() as tmp:
        shape = {"n": n, "c": c, "k": k, "hw": hw}
        rows = measure(programs.torch_v0, shape, capacity, args.calls, max(1, args.repeat), Path(tmp))
    print(
        f"N={n}, {c}->{k} channels, {hw}x{hw}, 3x3; wall-clock ms per call: median after {SETTLED} calls, median of "
        f"{max(1, args.repeat)} runs each, alone and under ucudnn alternately"
    )
    print(table(rows, capacity))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"ratio": r.ratio} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
