"""Rows + comments of consecutive sentences -> :class:`Sentence` s (shared by the CoNLL-U and stanza readers).

The assembler carries what CoNLL-U states once per document: the ``# newdoc id`` (every sentence up to the
next ``# newdoc`` gets it as ``doc_id``) and the ``# global.Entity`` field layout for coreference.
"""

from __future__ import annotations

from typing import Any

from structattn.structures.readers._coref import DEFAULT_FIELDS, EntityReader
from structattn.structures.readers._enhanced import enhanced_edges
from structattn.structures.readers._rows import Locator, Row
from structattn.structures.sentence import Sentence

COREF_IDS = "coref_ids"  # meta key: entity id of each cluster in Sentence.coref


class SentenceAssembler:
    """Builds sentences one after the other.

    Args:
        source: what error messages call the input (file name, ``"<text>"``, ``"stanza document"``).

    Attributes:
        document: index of the current document (increases at every ``# newdoc``; -1 before the first).
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.document = -1
        self.doc_id: str | None = None
        self.entity_fields: tuple[str, ...] | None = None  # None: document has no global.Entity

    def build(self, rows: list[Row], comments: list[tuple[str, str | None]], first_line: int | None) -> Sentence:
        """One sentence from its token rows and its ``(key, value)`` comments.

        Raises:
            ValueError: any malformed or invalid annotation, naming the source line, sentence and token.
        """
        meta: dict[str, Any] = dict(comments)
        sentence_id = meta.pop("sent_id", None)
        if "newdoc id" in meta or "newdoc" in meta or self.document < 0:
            self._new_document(meta)
        if "global.Entity" in meta:
            self.entity_fields = tuple((meta["global.Entity"] or "").split("-"))
        locate = Locator(self.source, sentence_id, rows, first_line)
        words = [r for r in rows if r.kind == "word"]
        if not words:
            raise locate.error(None, "no words (only comments or empty nodes)")
        self._check_ids(words, locate)
        coref = self._coref(rows, locate)
        if coref is not None:
            meta[COREF_IDS] = coref[1]
        fields = dict(
            words=[r.form for r in words],
            heads=self._heads(words, locate),
            deprels=_column([r.deprel for r in words]),
            upos=_column([r.upos for r in words]),
            edges=enhanced_edges(rows, locate),
            coref=None if coref is None else coref[0],
            multiword=self._multiword(rows, len(words), locate),
        )
        try:
            return Sentence(**fields, id=sentence_id, doc_id=self.doc_id, meta=meta)
        except ValueError as error:  # tree / mention checks of Sentence: add the line of the token named
            raise locate.wrap(error) from error

    def _new_document(self, meta: dict[str, Any]) -> None:
        self.document += 1
        self.doc_id = meta.pop("newdoc id", None)
        self.entity_fields = None

    @staticmethod
    def _check_ids(words: list[Row], locate: Locator) -> None:
        for expected, row in enumerate(words, start=1):
            if row.key[0] != expected:
                raise locate.error(row, f"word ID {row.label} ({row.form!r}) out of order: expected {expected}")

    @staticmethod
    def _heads(words: list[Row], locate: Locator) -> list[int] | None:
        if all(r.head is None for r in words):
            return None
        missing = next((r for r in words if r.head is None), None)
        if missing is not None:
            raise locate.error(missing, f"{locate.token(missing)} has no HEAD, but other words have one")
        roots = [r for r in words if r.head == 0]
        if len(roots) > 1:
            raise locate.error(roots[1], f"{locate.token(roots[1])} is a second root (head 0); the first is "
                                         f"{locate.token(roots[0])}")
        n = len(words)
        for r in words:
            if not 0 <= r.head <= n:
                raise locate.error(r, f"{locate.token(r)} has HEAD {r.head}, but the sentence has {n} words "
                                      f"(valid: 0..{n}, 0 = root)")
        return [r.head - 1 for r in words]

    def _coref(self, rows: list[Row], locate: Locator) -> tuple[list, list[str]] | None:
        if self.entity_fields is None and not any(r.entity for r in rows):
            return None
        return EntityReader(rows, self.entity_fields or DEFAULT_FIELDS, locate).read()

    @staticmethod
    def _multiword(rows: list[Row], n: int, locate: Locator) -> list[tuple[int, int, str]]:
        out = []
        for r in rows:
            if r.kind == "range":
                first, last = r.key
                if not 1 <= first <= last <= n:
                    raise locate.error(r, f"multi-word token {r.label} ({r.form!r}) does not cover words of the "
                                          f"sentence (1..{n})")
                out.append((first - 1, last - 1, r.form))
        return out


def _column(values: list[str | None]) -> list[str] | None:
    """A column as a list, ``None`` when every value is missing; single missing values become ``"_"``."""
    if all(v is None for v in values):
        return None
    return ["_" if v is None else v for v in values]
