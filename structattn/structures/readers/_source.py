"""Input handling shared by the readers: a path or the text itself, split into numbered blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Union

PathOrText = Union[str, Path]


def read_source(path_or_text: PathOrText) -> tuple[str, str]:
    """Return ``(text, source_name)``.

    A ``Path``, or a non-blank ``str`` with neither a newline nor a tab, is a file path (read as UTF-8); any
    other ``str`` is the text itself. ``source_name`` is what error messages call it: the file name, or ``"<text>"``.

    Raises:
        FileNotFoundError: when the path does not exist.
        TypeError: for anything but ``str`` / ``Path``.
    """
    if isinstance(path_or_text, str) and ("\n" in path_or_text or "\t" in path_or_text or not path_or_text.strip()):
        return path_or_text, "<text>"  # an empty string is empty text, not a path
    if not isinstance(path_or_text, (str, Path)):
        raise TypeError(f"expected a path or the file's text, got {type(path_or_text).__name__}")
    path = Path(path_or_text)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r} (pass the text itself if you meant text)")
    return path.read_text(encoding="utf-8"), path.name


def numbered_blocks(text: str, first_line: int = 1) -> Iterator[list[tuple[int, str]]]:
    """Blank-line separated blocks of ``(line_number, line)`` pairs (1-based numbers, line ends stripped)."""
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), start=first_line):
        line = line.rstrip("\r")
        if line.strip():
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def parse_comment(line: str) -> tuple[str, str | None]:
    """``"# key = value"`` -> ``("key", "value")``; a comment without ``=`` -> ``(text, None)``."""
    body = line[1:].strip()
    if "=" in body:
        key, value = body.split("=", 1)
        return key.strip(), value.strip()
    return body, None
