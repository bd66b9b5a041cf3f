"""The reader-neutral form of one CoNLL-U line, and the locator that puts line numbers into errors.

Both the CoNLL-U reader and the stanza converter turn their input into :class:`Row` s; one assembler
(``_assemble.py``) turns rows into :class:`~structattn.structures.Sentence` s, so both sources agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence, Union

from structattn.structures.sentence import describe_sentence

NodeKey = Union[int, tuple[int, int]]  # word id (0 = root) or empty node (word, k), as in the file (1-based)


@dataclass(frozen=True)
class Row:
    """One token line.

    Attributes:
        kind: ``"word"``, ``"empty"`` (an empty node ``8.1``) or ``"range"`` (a multi-word token ``1-2``).
        key: ``(n,)`` for a word, ``(n, k)`` for an empty node, ``(first, last)`` for a range; 1-based.
        form: the FORM column.
        upos, head, deprel: the columns, ``None`` where the file has ``_``; ``head`` is 1-based, 0 = root.
        deps: the DEPS column as ``(head_key, label)`` pairs, ``None`` for ``_``.
        entity: the value of ``Entity=`` in MISC (CorefUD coreference), if any.
        line: line number in the source, when there is one.
    """

    kind: str
    key: tuple[int, ...]
    form: str
    upos: str | None = None
    head: int | None = None
    deprel: str | None = None
    deps: tuple[tuple[NodeKey, str], ...] | None = None
    entity: str | None = None
    line: int | None = None

    @property
    def label(self) -> str:
        """The id as the file writes it: ``7``, ``8.1`` or ``1-2``."""
        sep = {"word": "", "empty": ".", "range": "-"}[self.kind]
        return sep.join(str(k) for k in self.key)


def dependency_pairs(deps: list[tuple[str, Any]] | None) -> tuple[tuple[NodeKey, str], ...] | None:
    """``conllu``'s parsed DEPS (``[(label, 3), (label, (8, ".", 1))]``) as ``((3, label), ((8, 1), label))``."""
    if deps is None:
        return None
    return tuple((head if isinstance(head, int) else (head[0], head[2]), label) for label, head in deps)


def present(value: str | None) -> str | None:
    """A column value, ``None`` for ``_``."""
    return None if value in (None, "_") else value


_TOKEN_IN_MESSAGE = re.compile(r"\btoken (\d+)\b")


class Locator:
    """Builds error messages ``"<source> line <n>: sentence '<id>': token <i> ('<form>', ID <id>) ..."``.

    Args:
        source: file name, ``"<text>"``, or a description of a non-file source.
        sentence_id: the sentence's id (``None`` when it has none).
        rows: the sentence's rows (to find the line of a word).
        first_line: line of the sentence's first line (comments included), the fallback location.
    """

    def __init__(self, source: str, sentence_id: str | None, rows: Sequence[Row], first_line: int | None) -> None:
        self.source = source
        self.sentence_id = sentence_id
        self.words = [r for r in rows if r.kind == "word"]
        self.first_line = first_line

    def where(self, line: int | None) -> str:
        line = self.first_line if line is None else line
        return self.source if line is None else f"{self.source} line {line}"

    def token(self, row: Row) -> str:
        """``token 6 ('děje', ID 7)`` for a word (0-based index as in the library, and the file's ID)."""
        if row.kind == "word":
            return f"token {row.key[0] - 1} ({row.form!r}, ID {row.label})"
        return f"{'empty node' if row.kind == 'empty' else 'multi-word token'} {row.label} ({row.form!r})"

    def error(self, row: Row | None, message: str) -> ValueError:
        """A ``ValueError`` located at ``row`` (or at the sentence start when ``row`` is None)."""
        return ValueError(f"{self.where(None if row is None else row.line)}: {describe_sentence(self.sentence_id)}: {message}")

    def wrap(self, error: ValueError) -> ValueError:
        """Prefix a validation error raised by ``Sentence`` with the line of the first token it names."""
        line = None
        match = _TOKEN_IN_MESSAGE.search(str(error))
        if match and int(match.group(1)) < len(self.words):
            line = self.words[int(match.group(1))].line
        return ValueError(f"{self.where(line)}: {error}")
