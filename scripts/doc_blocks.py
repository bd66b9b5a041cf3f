"""Generated blocks of the README and docs: the text between two HTML-comment markers, read and replaced. Shared by
``translation_headline.py`` and ``precision_check.py`` (imported beside them)."""

from __future__ import annotations

from pathlib import Path


def between(text: str, start: str, end: str, what: str) -> str:
    """The text between the markers ``start`` and ``end`` of ``text`` (the file ``what``); a missing marker is a
    ``ValueError`` naming the file and the block."""
    if start not in text or end not in text:
        raise ValueError(f"{what} has no {start} ... {end} block")
    return text.split(start, 1)[1].split(end, 1)[0]


def replace_block(path: Path, start: str, end: str, body: str) -> None:
    """Rewrite ``path`` with ``body`` between its markers (one newline each side); the rest stays byte for byte."""
    text = path.read_text()
    between(text, start, end, path.name)  # the markers are there
    before, rest = text.split(start, 1)
    path.write_text(before + start + "\n" + body.rstrip("\n") + "\n" + end + rest.split(end, 1)[1])
