"""Input handling shared by the readers: a path or the text itself, split into numbered blocks.

Files are read as UTF-8. A leading byte-order mark (``EF BB BF``, which some Windows editors write) is an
encoding signature, not content: it is dropped, so the first sentence's first comment or token reads as
written. A file that is not UTF-8 raises ``ValueError`` naming the file, the line, the byte offset and the
offending bytes and, when ``charset_normalizer`` is installed, the encoding it most likely is, with the
``iconv`` command that converts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Union

PathOrText = Union[str, Path]
BOM = "\ufeff"


def read_utf8(path: str | Path) -> str:
    """The text of the file ``path`` (UTF-8, a leading BOM dropped).

    Raises:
        ValueError: the file is not UTF-8 (see the module docstring for what the message says).
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(not_utf8_message(str(path), data, error)) from None
    return text[1:] if text.startswith(BOM) else text


def not_utf8_message(name: str, data: bytes, error: UnicodeDecodeError) -> str:
    """``file 'x.conllu' is not UTF-8 (line 3, byte offset 41: 0xe9); it looks like cp1250: convert ...``."""
    line = data.count(b"\n", 0, error.start) + 1
    bad = " ".join(f"0x{b:02x}" for b in data[error.start:min(error.end, error.start + 4)])
    message = f"file {name!r} is not UTF-8 (line {line}, byte offset {error.start}: {bad})"
    guess = _guess_encoding(data)
    if guess is None:
        return message + "; convert it to UTF-8 (e.g. iconv -f <its encoding> -t utf-8) and read it again"
    return message + f"; it looks like {guess}: convert it with iconv -f {guess} -t utf-8 {name!r} > converted"


def _guess_encoding(data: bytes) -> str | None:
    """The most likely encoding by ``charset_normalizer`` (only if it is installed; never ``utf_8``)."""
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return None
    best = from_bytes(data[:200_000]).best()
    if best is None or best.encoding.replace("-", "_") in ("utf_8", "ascii"):
        return None
    return best.encoding.replace("_", "-")


def read_source(path_or_text: PathOrText) -> tuple[str, str]:
    """Return ``(text, source_name)``.

    A ``Path``, or a non-blank ``str`` with neither a newline nor a tab, is a file path (read as UTF-8, see
    :func:`read_utf8`); any other ``str`` is the text itself (a leading BOM dropped as well).
    ``source_name`` is what error messages call it: the file name, or ``"<text>"``.

    Raises:
        FileNotFoundError: when the path does not exist.
        ValueError: when the file is not UTF-8.
        TypeError: for anything but ``str`` / ``Path``.
    """
    if isinstance(path_or_text, str) and ("\n" in path_or_text or "\t" in path_or_text or not path_or_text.strip()):
        text = path_or_text[1:] if path_or_text.startswith(BOM) else path_or_text
        return text, "<text>"  # an empty string is empty text, not a path
    if not isinstance(path_or_text, (str, Path)):
        raise TypeError(f"expected a path or the file's text, got {type(path_or_text).__name__}")
    path = Path(path_or_text)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r} (pass the text itself if you meant text)")
    return read_utf8(path), path.name


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
