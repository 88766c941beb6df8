"""README.md and docs/results.md carry the one results table, as generated from eval/results/."""

from __future__ import annotations

import pytest

from eval.results_table import BEGIN, END, TARGETS, table, with_table

pytestmark = pytest.mark.unit


def test_readme_and_results_doc_carry_the_generated_table():
    block = table()
    assert "hybrid-learned (serving)" in block and "eval/results/peers.json" in block
    for path in TARGETS:
        text = path.read_text(encoding="utf-8")
        assert with_table(text, block) == text, f"{path.name} is stale: run python -m eval.results_table"


def test_only_the_marked_block_is_replaced():
    text = f"before\n{BEGIN}\nold numbers\n{END}\nafter\n"
    assert with_table(text, "new") == f"before\n{BEGIN}\nnew\n{END}\nafter\n"
    with pytest.raises(ValueError):
        with_table("no markers here", "new")


def test_the_readme_stays_a_readme():
    """For users, at most 6 KB: measurements and history live in docs/."""
    [readme] = [path for path in TARGETS if path.name == "README.md"]
    assert len(readme.read_bytes()) <= 6 * 1024, len(readme.read_bytes())
