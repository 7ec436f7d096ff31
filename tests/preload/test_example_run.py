"""The shipped example under ``ucudnn run``, the exit summary, and the stats file a run always leaves.

These run the real ``ucudnn run`` (``python -m ucudnn.cli run``) with the built preload library over the
shipped example, as the README tells a new user to, on the host backend with its model clock.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._env import project_pythonpath
from ucudnn import counters

from .conftest import ROOT, base_env

EXAMPLE = [sys.executable, "-m", "ucudnn.examples.train", "--steps", "2", "--memory", "2MiB"]
SUMMARY = re.compile(
    r"^ucudnn: (\d+) kernel\(s\), (\d+) convolution call\(s\), (\d+) cuDNN call\(s\) in all: (\d+) micro-batched, "
    r"(\d+) undivided, (\d+) passed through(?:, (\d+) timing new plans against cuDNN alone \((\d+) of them "
    r"micro-batched\))?(?:; (\d+) new plan\(s\) still being checked at exit)?",
    re.M,
)
NOTHING_SEEN = "no cuDNN convolution call reached the preload library"


def run(tmp_path: Path, *args: str, under: bool = True, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    full = base_env()
    full["PYTHONPATH"] = project_pythonpath(full)
    full["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
    full["UCUDNN_VERIFY_SAMPLES"] = "3"  # the defaults of a user's run
    full.update(env or {})
    cmd = [sys.executable, "-m", "ucudnn.cli", "run", *args] if under else list(args[args.index("--") + 1 :])
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc


def losses(stdout: str) -> list[float]:
    return [float(v) for v in re.findall(r"loss (\S+)", stdout)]


def stats(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_the_example_micro_batches_under_ucudnn_run(tmp_path: Path) -> None:
    alone = run(tmp_path, "--", *EXAMPLE, under=False)
    under = run(tmp_path, "--stats-file", "stats.json", "--", *EXAMPLE)
    # The same training (same losses as printed), micro-batched: more micro-batches than calls.
    assert len(losses(alone.stdout)) == 2, alone.stdout
    assert losses(under.stdout) == pytest.approx(losses(alone.stdout), rel=1e-4), (alone.stdout, under.stdout)
    s = stats(tmp_path / "stats.json")
    assert set(s) == set(counters.COUNTERS) | set(counters.STATE), s  # uc_stats.def's counters, and the state
    assert s["calls"] > 0 and s["divided_calls"] > 0 and s["micro_batches"] > s["calls"], s
    assert 0 < s["peak_workspace"] <= 2 << 20  # within --memory
    # One summary line at exit, from the counters the stats file has: what ran, counted apart.
    lines = SUMMARY.findall(under.stderr)
    assert len(lines) == 1, under.stderr
    kernels, calls, cudnn, divided, undivided, passed, checking, checking_divided, unfinished = (
        int(v or 0) for v in lines[0]
    )
    assert (kernels, calls, cudnn, passed) == (s["kernels"], s["calls"], s["micro_batches"], s["passthrough"])
    assert (checking, checking_divided) == (s["verify_executions"], s["verify_divided_calls"])
    assert divided == s["divided_calls"] - s["verify_divided_calls"]  # a check's plan executions apart
    assert divided + undivided + passed + checking == calls
    assert unfinished == s["checks_started"] - s["verified"]
    assert f"{s['predicted_ms']:.4g} ms in all vs {s['undivided_predicted_ms']:.4g} ms" in under.stderr
    assert NOTHING_SEEN not in under.stderr and SUMMARY.search(alone.stderr) is None
    # `ucudnn stats` reads the file out, each counter that moved with its meaning.
    shown = subprocess.run([sys.executable, "-m", "ucudnn.cli", "stats", "stats.json"], cwd=tmp_path,
                           env={**base_env(), "PYTHONPATH": project_pythonpath(base_env())}, capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert re.search(rf"^divided_calls +{s['divided_calls']}  legacy executions run micro-batched$", shown.stdout, re.M)
    assert f"process {s['pid']}; real library {s['real_library']}" in shown.stdout


def test_a_short_run_says_which_checks_did_not_finish_and_counts_them_apart(tmp_path: Path) -> None:
    """Was: "56% micro-batched", counting a check's alternating executions as micro-batched calls, and nothing
    about checks still running at exit (the shipped example never finishes one in its 4 steps)."""
    short = run(tmp_path, "--stats-file", "stats.json", "--", *EXAMPLE)
    s = stats(tmp_path / "stats.json")
    (line,) = SUMMARY.findall(short.stderr)
    unfinished = int(line[-1] or 0)
    # Two steps: every new micro-batched plan was still alternating with the undivided call at exit.
    assert s["checks_started"] > 0 and s["verified"] == 0 and unfinished == s["checks_started"], short.stderr
    assert int(line[6]) == s["verify_executions"] > 0 and int(line[3]) == s["divided_calls"] - s["verify_divided_calls"]
    assert "the next run checks them again" in short.stderr


def test_a_limit_that_never_bound_is_seen_as_such(tmp_path: Path) -> None:
    """Was: nothing showed that `--workspace 64MiB` changed nothing for a program that offers at most 1 MiB."""
    proc = run(tmp_path, "--workspace", "64MiB", "--", *EXAMPLE)
    (said,) = [ln for ln in proc.stderr.splitlines() if SUMMARY.match(ln)]
    assert re.search(r"UCUDNN_DEFAULT_WORKSPACE_LIMIT=64\.0 MiB bound 0 of \d+ call\(s\)[:]", said), said
    assert "it changed nothing, the program's own workspace (at most " in said, said
    # A limit below what the program offers shapes the lists it chooses from (its executions then fit them).
    tight = run(tmp_path, "--workspace", "64KiB", "--", *EXAMPLE)
    (said,) = [ln for ln in tight.stderr.splitlines() if SUMMARY.match(ln)]
    assert re.search(r"UCUDNN_DEFAULT_WORKSPACE_LIMIT=64\.0 KiB bound \d+ of \d+ call\(s\) and [1-9]\d* of ", said)
    assert "changed nothing" not in said
    auto = run(tmp_path, "--", *EXAMPLE)
    (said,) = [ln for ln in auto.stderr.splitlines() if SUMMARY.match(ln)]
    assert "workspace: the program's own (at most " in said


def test_the_summary_is_silenced_by_the_log_level(tmp_path: Path) -> None:
    quiet = run(tmp_path, "--log-level", "error", "--", *EXAMPLE)
    assert SUMMARY.search(quiet.stderr) is None, quiet.stderr


# A program that loads cuDNN privately (its own handle, not the dynamic symbols LD_PRELOAD interposes) and ends well.
PRIVATE_CUDNN = "import ctypes; from ucudnn import _paths; ctypes.CDLL(str(_paths.HOST_CUDNN)); print('loaded')"


def test_a_program_the_shim_never_sees_still_gets_a_stats_file_and_a_warning(tmp_path: Path) -> None:
    stale = tmp_path / "stats.json"
    stale.write_text('{"calls": 99}')  # an earlier run's: replaced, never read as this run's
    proc = run(tmp_path, "--stats-file", "stats.json", "--", sys.executable, "-c", PRIVATE_CUDNN)
    s = stats(stale)
    assert s["calls"] == 0 and s["queries"] == 0 and s["graph_calls"] == 0, s
    assert proc.stderr.count(NOTHING_SEEN) == 1, proc.stderr
    assert SUMMARY.search(proc.stderr) is None


@pytest.mark.parametrize(
    ("program", "status"),
    [
        (["true"], 0),  # never loads cuDNN: nothing to see
        ([sys.executable, "-c", "print('no convolutions')"], 0),
        ([sys.executable, "no-such-script.py"], 2),  # failed to start: its own message is the one that matters
        ([sys.executable, "-c", PRIVATE_CUDNN + "; raise SystemExit(3)"], 3),  # failed after loading cuDNN
    ],
    ids=["true", "no-cudnn", "failed-to-start", "failed"],
)
def test_no_warning_for_a_program_with_nothing_to_see_or_that_failed(
    tmp_path: Path, program: list[str], status: int
) -> None:
    """Was: the warning for `true` and for programs that never started."""
    full = base_env()
    full["PYTHONPATH"] = project_pythonpath(full)
    full["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
    proc = subprocess.run([sys.executable, "-m", "ucudnn.cli", "run", "--", *program], env=full, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == status, proc.stderr
    assert NOTHING_SEEN not in proc.stderr, proc.stderr


def test_a_child_without_calls_neither_warns_nor_overwrites_the_programs_counts(tmp_path: Path) -> None:
    # The program starts a child that inherits LD_PRELOAD and never calls cuDNN, then convolves: the child exits
    # first and writes its zeros only where no file exists; the program then writes its counts over them.
    child = (
        f"import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True); "
        f"import runpy; sys.argv = {EXAMPLE[2:]!r}; runpy.run_module('ucudnn.examples.train', run_name='__main__')"
    )
    proc = run(tmp_path, "--stats-file", "stats.json", "--", sys.executable, "-c", child)
    assert stats(tmp_path / "stats.json")["calls"] > 0
    assert NOTHING_SEEN not in proc.stderr, proc.stderr
    # A child that exits after its parent does not overwrite what the parent wrote.
    late = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1.5)'])"
    target = tmp_path / "late.json"
    target.write_text('{"calls": 7}')
    run(tmp_path, "--", sys.executable, "-c", late, env={"UCUDNN_STATS_FILE": str(target)})
    # ucudnn run removed the stale file; the program (no calls) wrote zeros; its child did not overwrite them.
    assert stats(target)["calls"] == 0


@pytest.mark.parametrize("through", [True, False])
def test_cudnn_load_goes_through_the_preload_library(tmp_path: Path, through: bool) -> None:
    code = (
        f"import numpy as np; from ucudnn import cudnn as C; lib = C.load(through_preload={through}); "
        "h = lib.handle(); x = np.ones((4, 2, 6, 6), np.float32); w = np.ones((3, 2, 3, 3), np.float32); "
        "lib.forward(h, x, w, C.ConvSpec(pads=(1, 1)), 0)"
    )
    run(tmp_path, "--stats-file", "stats.json", "--", sys.executable, "-c", code)
    assert stats(tmp_path / "stats.json")["calls"] == (1 if through else 0)


def test_the_readmes_first_run_commands_work_as_written(tmp_path: Path) -> None:
    """Every command of the README's "A first run" block, run as written (model clock, scratch cache)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## A first run", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert len(commands) == 2 and commands[1].startswith("ucudnn run"), commands
    env = base_env()
    env["PYTHONPATH"] = project_pythonpath(env)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # this venv's ucudnn
    env["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
    outs = [
        subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        for cmd in commands
    ]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert losses(outs[0].stdout) == pytest.approx(losses(outs[1].stdout), rel=1e-4)
    assert SUMMARY.search(outs[1].stderr) and stats(tmp_path / "stats.json")["calls"] > 0


def test_a_process_without_calls_looks_nothing_up_at_exit(tmp_path: Path, preload_lib: Path) -> None:
    # No cuDNN anywhere for this process to find: writing its zeros must not go looking for one (and warn).
    env = base_env()
    env.update({"LD_PRELOAD": str(preload_lib), "UCUDNN_STATS_FILE": str(tmp_path / "s.json")})
    proc = subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert stats(tmp_path / "s.json")["calls"] == 0


def test_a_forked_child_does_not_repeat_its_parents_summary(tmp_path: Path) -> None:
    # The program convolves, then forks a child that exits normally (destructors run) without a call of its own.
    code = (
        f"import os, sys; from ucudnn.examples.train import main; main({EXAMPLE[3:]!r}); "
        "pid = os.fork()\n"
        "if pid == 0: sys.exit(0)\n"
        "os.waitpid(pid, 0)"
    )
    proc = run(tmp_path, "--stats-file", "stats.json", "--", sys.executable, "-c", code)
    assert len(SUMMARY.findall(proc.stderr)) == 1, proc.stderr
    assert stats(tmp_path / "stats.json")["calls"] > 0


def test_an_unusable_stats_file_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = base_env()
    env["PYTHONPATH"] = project_pythonpath(env)
    for cmd in (["ucudnn.cli", "run", "--stats-file", str(blocker / "d" / "s.json"), "--", "true"],
                ["ucudnn.bench.cli", "--quick", "--database", str(blocker / "d" / "c.sqlite")]):  # fmt: skip
        proc = subprocess.run([sys.executable, "-m", *cmd], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and str(blocker / "d") in proc.stderr, proc.stderr
