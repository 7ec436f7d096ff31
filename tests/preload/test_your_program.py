"""docs/your-program.md, done as it says: its C program built with the flags `ucudnn paths` prints against the
headers the package ships and the host backend, then run alone and under `ucudnn run` -- the same checksum, and
ucudnn's plan micro-batched within the program's workspace budget."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from .conftest import base_env

DOC = Path(__file__).resolve().parents[2] / "docs" / "your-program.md"
LINE = re.compile(r"^status 0, algorithm (\d+), workspace (\d+) bytes, checksum (\S+)$")


def ucudnn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ucudnn.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_the_documented_program_builds_with_the_shipped_flags_and_runs_under_ucudnn(tmp_path: Path) -> None:
    text = DOC.read_text()
    block = re.search(r"<!-- your-program:start -->\n```c\n(.*?)```\n<!-- your-program:end -->", text, re.S)
    assert block, "docs/your-program.md lost its program"
    assert "cc $(ucudnn paths --cflags) conv.c -o conv $(ucudnn paths --libs)" in text
    (tmp_path / "conv.c").write_text(block.group(1))
    flags = [ucudnn("paths", what) for what in ("--cflags", "--libs")]
    assert all(p.returncode == 0 for p in flags), [p.stderr for p in flags]
    cflags, libs = (shlex.split(p.stdout) for p in flags)
    cc = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *cflags, "conv.c", "-o", "conv", *libs]
    built = subprocess.run(cc, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr

    env = base_env()
    env["UCUDNN_DATABASE"] = str(tmp_path / "cache.sqlite")
    alone = subprocess.run(["./conv"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    stats_file = tmp_path / "stats.json"
    under = subprocess.run(
        [sys.executable, "-m", "ucudnn.cli", "run", "--stats-file", str(stats_file), "--", "./conv"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert alone.returncode == 0 and under.returncode == 0, (alone.stderr, under.stderr)
    a, u = LINE.match(alone.stdout.strip()), LINE.match(under.stdout.strip())
    assert a and u, (alone.stdout, under.stdout)
    assert u.group(3) == a.group(3)  # the same result
    budget = 4 << 20
    assert int(a.group(2)) <= budget and int(u.group(2)) <= budget
    stats = json.loads(stats_file.read_text())
    assert stats["calls"] == 1 and stats["divided_calls"] == 1 and stats["micro_batches"] > 1, stats
