"""The README's table of variables is the declaration's own rendering (DESIGN: declared once)."""

from __future__ import annotations

import re
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
