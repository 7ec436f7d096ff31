"""The README's table of variables is the declaration's own rendering (DESIGN: declared once)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ucudnn.config import markdown_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_config_table_matches_declaration() -> None:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- config-table:start -->\n(.*?)\n<!-- config-table:end -->", text, re.S)
    assert m, "README.md lacks the config-table markers"
    assert m.group(1) == markdown_table(), "README table is stale: paste `python -m ucudnn.config --markdown`"


def test_readme_shows_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "pip install . && ucudnn-bench --quick" in text
    assert 'pip install -e ".[test]" && python -m pytest -q' in text


def test_readme_quick_run_time_is_the_one_help_gives() -> None:
    from ucudnn.bench.cli import QUICK_DURATION

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"ucudnn-bench --quick` takes {QUICK_DURATION}" in text


def test_readme_plan_example_works_on_an_exported_table(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- plan-example:start -->\n```sh\n(.*?)```\n<!-- plan-example:end -->", text, re.S)
    assert m, "README.md lacks the plan-example markers"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for line in m.group(1).splitlines():
        command = line.split("  #")[0].strip()
        r = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (command, r.stdout, r.stderr)
        outputs.append(r.stdout)
    assert "[1] fwd x32x8x8 w64x32x5x5 pad2,2  (batch 32" in outputs[2]
    assert outputs[3].startswith("fwd x32x8x8 w64x32x5x5 pad2,2: batch 32, policy powerOfTwo, limit 1MiB")
    assert " GEMM" in outputs[3] and "workspace division" in outputs[4]
