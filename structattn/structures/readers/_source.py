"""Input handling shared by the readers: a path or the text itself, split into numbered blocks.

Files are read as UTF-8. A leading byte-order mark (``EF BB BF``, which some Windows editors write) is an
encoding signature, not content: it is dropped, so the first sentence's first comment or token reads as
written. A file that is not UTF-8 raises ``ValueError`` naming the file, the line, the byte offset and the
offending bytes and, when ``charset_normalizer`` is installed, the encoding it most likely is, with the
``iconv`` command that converts it. A file (or text) with CR-only line endings (old Mac OS) raises
``ValueError`` saying so: read as it is, it would be one long line. :func:`check_control_characters` finds a
NUL or other control character where a reader expects text (a damaged or binary file).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, Sequence, Union

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
    check_line_endings(text, f"file {str(path)!r}")
    return text[1:] if text.startswith(BOM) else text


def check_line_endings(text: str, name: str) -> None:
    """``ValueError`` when ``text`` breaks its lines with CR alone (old Mac OS files): ``name`` is what the
    message calls it (``"file 'x.conllu'"``, ``"the text"``). CRLF (Windows) and LF are fine."""
    if "\r" in text and "\n" not in text:
        raise ValueError(f"{name} uses CR-only line endings; convert to LF (e.g. tr '\\r' '\\n' < in > out) "
                         "and read it again")


#: Control characters (Unicode category Cc) that never belong in a CoNLL-U or SDP line: C0 but TAB and LF
#: (a CR is allowed only as part of a CRLF line end), DEL and C1.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_NAMES = {0x00: "NUL", 0x08: "BS", 0x0B: "VT", 0x0C: "FF", 0x0D: "CR", 0x1B: "ESC", 0x7F: "DEL", 0x85: "NEL"}


def check_control_characters(text: str, source: str, columns: Sequence[str] = ()) -> None:
    """``ValueError`` at the first control character of ``text`` (see :data:`_CONTROL`), naming ``source``,
    the line, the column (1-based, in characters) and, for a tab-separated line, the field (``columns``
    names them in order) and the token ID; a ``#`` line is called a comment.

    Without this check a NUL in a FORM would be read as (part of) a word."""
    for match in _CONTROL.finditer(text):
        pos = match.start()
        if text[pos] == "\r" and (text.startswith("\n", pos + 1) or pos + 1 == len(text)):
            continue  # the CR of a CRLF line end
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        line = text[start:end if end >= 0 else None]
        column = pos - start + 1
        code = ord(text[pos])
        name = f"U+{code:04X}" + (f" ({_CONTROL_NAMES[code]})" if code in _CONTROL_NAMES else "")
        if line.startswith("#") or "\t" not in line:
            where = "in a comment" if line.startswith("#") else "in a line without tabs"
        else:
            field = line[:column - 1].count("\t")
            label = columns[field].upper() if field < len(columns) else f"column {field + 1}"
            where = f"in the {label} of token ID {line.split(chr(9))[0]!r}"
        raise ValueError(f"{source} line {text.count(chr(10), 0, pos) + 1}, column {column}: control character "
                         f"{name} {where}; the file is damaged or not plain text (remove the character)")


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

    A ``Path``, or a non-blank ``str`` with no newline, CR or tab, is a file path (read as UTF-8, see
    :func:`read_utf8`); any other ``str`` is the text itself (a leading BOM dropped as well).
    ``source_name`` is what error messages call it: the file name, or ``"<text>"``.

    Raises:
        FileNotFoundError: when the path does not exist.
        ValueError: when the file is not UTF-8, or it (or the text) has CR-only line endings.
        TypeError: for anything but ``str`` / ``Path``.
    """
    if isinstance(path_or_text, str) and (any(c in path_or_text for c in "\n\r\t") or not path_or_text.strip()):
        check_line_endings(path_or_text, "the text")
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
