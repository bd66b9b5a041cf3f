"""scripts/doc_blocks.py: the generated blocks of README.md and docs/ are read and replaced between their markers,
the rest of the file byte for byte; a missing marker names the file and the block."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("doc_blocks", ROOT / "scripts" / "doc_blocks.py")
doc_blocks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doc_blocks)
START, END = "<!-- x:start -->", "<!-- x:end -->"


def test_replace_block_changes_only_the_text_between_the_markers(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\nbefore {START}\nold\nrows\n{END} after\n\n{START} a second pair stays\n")
    doc_blocks.replace_block(page, START, END, "new row\n\n")
    assert page.read_text() == f"# Title\n\nbefore {START}\nnew row\n{END} after\n\n{START} a second pair stays\n"
    assert doc_blocks.between(page.read_text(), START, END, "page.md") == "\nnew row\n"


@pytest.mark.parametrize("text", [f"{START} no end", f"no start {END}", "neither"])
def test_a_missing_marker_names_the_file_and_the_block(tmp_path, text):
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(ValueError, match=r"page.md has no <!-- x:start --> \.\.\. <!-- x:end --> block"):
        doc_blocks.replace_block(page, START, END, "body")
    assert page.read_text() == text
