"""Token-by-token construction of a generated sentence: words, tags, a dependency tree and a constituency tree.

Phrase rules append tokens in surface order and attach them when their governor is known; constituents are
nested ``(label, children)`` tuples whose leaves are token indices. :meth:`SentenceBuilder.build` turns the
result into a validated :class:`~structattn.structures.Sentence`.
"""

from __future__ import annotations

from typing import Any, Union

from structattn.structures.generators.enhanced import enhanced_edges
from structattn.structures.sentence import Mention, Sentence

#: A constituent: ``(label, children)``; a child is a constituent or a token index (a leaf).
Node = tuple[str, list[Union["Node", int]]]


class SentenceBuilder:
    """Accumulates the tokens of one sentence with their annotation."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.upos: list[str] = []
        self.xpos: list[str] = []
        self.number: list[str | None] = []
        self.heads: list[int | None] = []
        self.deprels: list[str | None] = []

    def __len__(self) -> int:
        return len(self.words)

    def token(self, word: str, upos: str, xpos: str, number: str | None = None) -> int:
        """Append a word; returns its index. ``number`` (``"Sing"``/``"Plur"``) becomes the Number feature."""
        self.words.append(word)
        self.upos.append(upos)
        self.xpos.append(xpos)
        self.number.append(number)
        self.heads.append(None)
        self.deprels.append(None)
        return len(self.words) - 1

    def attach(self, dependent: int, head: int, relation: str) -> None:
        """Set the basic-tree head (``-1`` for the root) and relation of ``dependent``."""
        if self.heads[dependent] is not None:
            raise RuntimeError(f"generator bug: token {dependent} ({self.words[dependent]!r}) attached twice")
        self.heads[dependent] = head
        self.deprels[dependent] = relation

    def render(self, node: Node | int) -> str:
        """Penn-style bracketing of a constituent: ``(NP (DT the) (NN dog))``."""
        if isinstance(node, int):
            return f"({self.xpos[node]} {self.words[node]})"
        label, children = node
        return f"({label} " + " ".join(self.render(child) for child in children) + ")"

    def feats(self) -> list[str]:
        """UD FEATS strings (``Number=Sing`` or ``_``)."""
        return [f"Number={n}" if n is not None else "_" for n in self.number]

    def build(
        self,
        root: Node,
        sentence_id: str,
        meta: dict[str, Any],
        coref: list[list[Mention]] | None = None,
        doc_id: str | None = None,
    ) -> Sentence:
        """The finished, validated sentence (enhanced edges derived from the basic tree)."""
        unattached = [i for i, h in enumerate(self.heads) if h is None]
        if unattached:
            raise RuntimeError(f"generator bug: {sentence_id!r} tokens {unattached} have no head")
        heads = [int(h) for h in self.heads]  # type: ignore[arg-type]
        deprels = [str(r) for r in self.deprels]
        edges = enhanced_edges(self.words, heads, deprels, self.upos, self.xpos)
        meta = {"xpos": list(self.xpos), "feats": self.feats(), **meta}
        return Sentence(
            words=list(self.words),
            heads=heads,
            deprels=deprels,
            edges=edges,
            coref=coref,
            upos=list(self.upos),
            constituency=self.render(root),
            id=sentence_id,
            doc_id=doc_id,
            meta=meta,
        )
