"""What the README and the docs it points to say, checked: the tables of variables and of counters are their
declarations' own renderings (DESIGN: declared once), the two commands, the CLI's plan example, the first run's
figures; and the README stays a map (at most 250 lines, every docs page it links exists)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests._env import ROOT
from ucudnn import counters
from ucudnn.config import markdown_table

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def test_config_table_matches_declaration() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- config-table:start -->\n(.*?)\n<!-- config-table:end -->", text, re.S)
    assert m, "docs/configuration.md lacks the config-table markers"
    assert m.group(1) == markdown_table(), "the table is stale: paste `python -m ucudnn.config --markdown`"


def test_counter_table_matches_the_list() -> None:
    text = (DOCS / "exit-summary.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- stats-table:start -->\n(.*?)\n<!-- stats-table:end -->", text, re.S)
    assert m, "docs/exit-summary.md lacks the stats-table markers"
    assert m.group(1) == counters.markdown_table(), "the table is stale: paste `python -m ucudnn.counters --markdown`"


def test_readme_is_a_map_whose_links_exist() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    links = set(re.findall(r"\]\((docs/[^)#]+)\)", text))
    assert links, "the README points to no docs page"
    assert all((ROOT / link).is_file() for link in links), sorted(link for link in links if not (ROOT / link).is_file())
    for page in DOCS.glob("*.md"):  # and the pages' links to each other
        for link in re.findall(r"\]\(([a-z-]+\.md)\)", page.read_text(encoding="utf-8")):
            assert (DOCS / link).is_file(), (page.name, link)


def test_readme_shows_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "pip install . && ucudnn-bench --quick" in text
    assert 'pip install -e ".[test]" && python -m pytest -q' in text


def test_readme_quick_run_time_is_the_one_help_gives() -> None:
    from ucudnn.bench.cli import QUICK_DURATION

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"ucudnn-bench --quick` takes {QUICK_DURATION}" in text


def test_cli_plan_example_works_on_an_exported_table(tmp_path: Path) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- plan-example:start -->\n```sh\n(.*?)```\n<!-- plan-example:end -->", text, re.S)
    assert m, "docs/cli.md lacks the plan-example markers"
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


def _flat() -> str:
    return " ".join(README.read_text(encoding="utf-8").split())


def test_readme_example_figures_are_of_the_examples_defaults() -> None:
    """The first run's measured figures name the example's own defaults (was: `--steps 6`; the example runs 4)."""
    from ucudnn.examples.train import parse_args

    defaults = parse_args([])
    m = re.search(r"defaults: N = (\d+), `--memory (\S+)`, `--steps (\d+)`", _flat())
    assert m, "README.md's first-run figures do not name the example's defaults"
    assert (int(m[1]), m[2], int(m[3])) == (defaults.batch, defaults.memory, defaults.steps)


def test_readme_quotes_one_example_summary_in_the_format_printed() -> None:
    """One summary line is quoted (was: three different ones), in the format the preload library prints, its counts
    adding up, and the measured paragraph quotes that summary's prediction."""
    from tests.preload.test_example_run import SUMMARY

    quoted = [ln for ln in README.read_text(encoding="utf-8").splitlines() if re.match(r"ucudnn: \d+ kernel", ln)]
    assert len(quoted) == 1, quoted
    m = SUMMARY.match(quoted[0])
    assert m, quoted[0]
    calls, divided, undivided, passed, checking = (int(m[i] or 0) for i in (2, 4, 5, 6, 7))
    assert divided + undivided + passed + checking == calls
    p = re.search(r"predicted ([\d.]+) ms in all vs ([\d.]+) ms for cuDNN alone in the same workspaces \(([\d.]+)x\)",
                  quoted[0])  # fmt: skip
    assert p, quoted[0]
    assert f"{float(p[2]) / float(p[1]):.2f}" == p[3]
    assert f"the summary predicted {p[1]} ms vs {p[2]} ms ({p[3]}x)" in _flat()
