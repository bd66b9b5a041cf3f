"""``doc_agreement``: agreement of every main verb of a synthetic-grammar document (token task)."""

from __future__ import annotations

import random
from typing import Any

from structattn.tasks.base import IGNORE, register_task
from structattn.tasks.agreement import NUMBERS, VERB_PLACEHOLDER
from structattn.tasks.synthetic import SyntheticTask
from structattn.structures.generators import GrammarGenerator
from structattn.structures.sentence import Document, Sentence


def main_verbs(document: Document) -> dict[int, str]:
    """Document word index of every sentence's main verb -> its number (``"Sing"`` / ``"Plur"``)."""
    out = {}
    for sentence, offset in zip(document.sentences, document.offsets):
        if "verb_index" not in sentence.meta or sentence.meta.get("verb_number") not in NUMBERS:
            raise ValueError(f"task 'doc_agreement': sentence {sentence.id!r} of document {document.id!r} has no "
                             "agreement record (meta verb_index, verb_number); use GrammarGenerator documents")
        out[offset + int(sentence.meta["verb_index"])] = sentence.meta["verb_number"]
    return out


@register_task("doc_agreement")
class DocAgreement(SyntheticTask):
    """Token task on documents: every main verb is replaced by ``<verb>`` and tagged with its number
    (0 singular, 1 plural); other words are ignored. Numbers are drawn at random, so a split holds a few more
    verbs of one number; with ``balance`` (default) a seeded random subset of the surplus verbs is not scored
    (``meta["verb_scored"] = False`` on their sentence; they keep their ``<verb>`` placeholder), which makes
    every split exactly balanced (majority baseline 0.5). Subjects are often pronouns or definite NPs re-mentioning
    an entity of an earlier sentence, so the documents carry all three gold structures a prior can read:
    dependency trees, semantic (enhanced UD) graphs and coreference chains (the structure comparison).

    Args:
        num_sentences: sentences per document.
        train, dev, test, seed: documents per split and seed (see
            :class:`~structattn.tasks.synthetic.SyntheticTask`).
        max_depth: embedding depth of the grammar.
        balance: score equally many singular and plural verbs in every split.
    """

    output = "token"

    def __init__(self, num_sentences: int = 4, max_depth: int = 2, balance: bool = True, **sizes: Any) -> None:
        if num_sentences < 1:
            raise ValueError(f"task 'doc_agreement': num_sentences must be >= 1, got {num_sentences}")
        super().__init__(**sizes)
        self.num_sentences, self.max_depth, self.balance = num_sentences, max_depth, bool(balance)

    def options(self) -> dict[str, Any]:
        return {"num_sentences": self.num_sentences, "max_depth": self.max_depth, "balance": self.balance,
                **super().options()}

    @property
    def num_labels(self) -> int:
        return 2

    def generate(self, split: str, k: int, seed: int) -> list[Document]:
        generator = GrammarGenerator(seed, max_depth=self.max_depth, p_coord=0.0)
        documents = [generator.document(self.num_sentences) for _ in range(k)]
        if self.balance:
            _balance_verbs(documents, random.Random(seed))
        return documents

    def inputs(self, item: Document) -> list[str]:
        verbs = main_verbs(item)
        return [VERB_PLACEHOLDER if i in verbs else w for i, w in enumerate(item.words)]

    def label(self, item: Document) -> list[int]:
        verbs = main_verbs(item)
        scored = {offset + int(s.meta["verb_index"]) for s, offset in zip(item.sentences, item.offsets)
                  if s.meta.get("verb_scored", True)}
        return [NUMBERS.index(verbs[i]) if i in scored else IGNORE for i in range(len(item))]


def _balance_verbs(documents: list[Document], rng: random.Random) -> None:
    """Mark ``verb_scored = False`` on a random subset of the surplus number's sentences (in place)."""
    by_number: dict[str, list[Sentence]] = {number: [] for number in NUMBERS}
    for document in documents:
        main_verbs(document)  # validates the agreement records
        for sentence in document.sentences:
            by_number[sentence.meta["verb_number"]].append(sentence)
    fewer = min(len(group) for group in by_number.values())
    for group in by_number.values():
        for sentence in rng.sample(group, len(group) - fewer):
            sentence.meta["verb_scored"] = False
