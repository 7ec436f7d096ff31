"""Ctrl-C (or a handler's SystemExit) while ucudnn plans inside a cuDNN call reaches the program, as it would
without ucudnn; nothing half-written is left in the cache; a program that catches it and goes on plans again.

Was: the planner callback caught KeyboardInterrupt ("planning failed (KeyboardInterrupt: ); this call runs
undivided"), and `ucudnn-bench --quick` interrupted in its first seconds ran on for 30 s and exited 0.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from .conftest import clean_env

HOST = Path(__file__).with_name("interrupt_host.py")


def _rows(db: Path) -> tuple[list[int], int]:
    with sqlite3.connect(db) as conn:
        runs = [int(b) for (b,) in conn.execute("SELECT batch FROM benchmark_runs ORDER BY batch")]
        plans = int(conn.execute("SELECT COUNT(*) FROM plans").fetchone()[0])
        # Every run is stored whole: each size's rows are there, and no rows without their run.
        orphans = conn.execute(
            "SELECT COUNT(*) FROM benchmarks b WHERE NOT EXISTS (SELECT 1 FROM benchmark_runs r WHERE r.key = b.key "
            "AND r.backend_id = b.backend_id AND r.batch = b.batch)"
        ).fetchone()[0]
        empty = conn.execute(
            "SELECT COUNT(*) FROM benchmark_runs r WHERE NOT EXISTS (SELECT 1 FROM benchmarks b WHERE r.key = b.key "
            "AND r.backend_id = b.backend_id AND r.batch = b.batch)"
        ).fetchone()[0]
    conn.close()
    assert orphans == 0 and empty == 0
    return runs, plans


def test_ctrl_c_while_planning_interrupts_the_program_at_its_cudnn_call(tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    proc = subprocess.Popen([sys.executable, str(HOST), str(db), "sigint"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    first = json.loads(proc.stdout.readline() or "{}")
    assert first.get("stage") == "interrupted at the cuDNN call", (first, proc.stderr and proc.stderr.read())
    assert first["sizes"] == [32, 16]  # interrupted while the second size was being benchmarked
    # Nothing half-written: the size measured before the interrupt is stored whole, no plan was stored.
    assert _rows(db) == ([32], 0)
    out, err = proc.communicate("y\n", timeout=120)
    second = json.loads(out.splitlines()[-1])
    # The program went on: the same kernel is planned again (nothing was cached as "no plan"), no error counted.
    assert second["stage"] == "planned again" and second["planner_errors"] == 0, second
    assert 0 < second["memory"] <= 1 << 20
    assert proc.returncode == 0 and "planning failed" not in err and "Traceback" not in err, err
    runs, plans = _rows(db)
    assert runs == [1, 2, 4, 8, 16, 32] and plans >= 1


def test_a_signal_handlers_system_exit_while_planning_ends_the_program(tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    proc = subprocess.run([sys.executable, str(HOST), str(db), "exit"], capture_output=True, text=True,
                          timeout=120, env=clean_env())  # fmt: skip
    assert proc.returncode == 5, (proc.stdout, proc.stderr)
    assert "not interrupted" not in proc.stdout and "planning failed" not in proc.stderr
    assert _rows(db) == ([32], 0)
