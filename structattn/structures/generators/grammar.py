"""``GrammarGenerator``: sentences and documents of a seeded probabilistic English-like grammar, with gold
dependency trees, constituency trees, enhanced dependencies, agreement records and coreference chains."""

from __future__ import annotations

import random
from typing import Iterable, Optional

from structattn.structures.generators.agreement import agreement_meta, plan_subject, planned_np
from structattn.structures.generators.builder import SentenceBuilder
from structattn.structures.generators.config import GrammarConfig
from structattn.structures.generators.discourse import Discourse
from structattn.structures.generators.phrases import InnerNP, PhraseRules
from structattn.structures.sentence import Document, Mention, Sentence


class GrammarGenerator:
    """Unlimited synthetic English-like data, deterministic given ``seed``.

    The grammar (lexicon in :mod:`~structattn.structures.generators.lexicon`)::

        S    -> NP VP .                 VP -> V (NP) (PP) | VP CC VP
        NP   -> DT (JJ) NN | NP PP | NP SBAR | NP CC NP (never a subject) | PRP (documents)
        PP   -> IN NP                   SBAR -> WHNP S   (subject or object relative clause)

    Verbs are present tense and agree in number with their subject. Each :class:`Sentence` carries: UD basic
    tree (``nsubj obj det amod case nmod obl acl:relcl conj cc punct root``), enhanced edges
    (see :mod:`~structattn.structures.generators.enhanced`), UPOS, Penn-style ``constituency``
    (``(S (NP ...) (VP ...) (. .))``, leaves = words), and ``meta``: ``xpos``, ``feats`` (``Number=...``),
    ``subject_index``, ``verb_index``, ``verb_number``, ``num_attractors`` (nouns of the other number
    between the main subject and its verb), ``wrong_verb_form``, ``generator``, ``seed``.

    Args:
        seed: seed of the generator's own ``random.Random`` (no global state is read or changed).
        max_depth, p_*: rule options, see :class:`GrammarConfig`.

    Example:
        >>> gen = GrammarGenerator(seed=0)
        >>> sentence = gen.sentence()
        >>> doc = gen.document(num_sentences=4)
    """

    def __init__(
        self,
        seed: int,
        max_depth: int = 3,
        p_relative: float = 0.2,
        p_object_relative: float = 0.4,
        p_pp: float = 0.3,
        p_coord: float = 0.15,
        p_adj: float = 0.3,
        p_transitive: float = 0.6,
        p_plural: float = 0.5,
        p_pronoun: float = 0.4,
        p_repeat: float = 0.3,
    ) -> None:
        if not isinstance(seed, int):
            raise ValueError(f"GrammarGenerator: seed must be an int, got {seed!r}")
        self.seed = seed
        self.config = GrammarConfig(
            max_depth, p_relative, p_object_relative, p_pp, p_coord, p_adj, p_transitive, p_plural, p_pronoun, p_repeat
        )
        self._rules = PhraseRules(random.Random(seed), self.config)
        self._count = 0

    def _next_id(self, kind: str) -> str:
        self._count += 1
        return f"grammar{self.seed}-{kind}{self._count}"

    def _sentence(self, sentence_id: str, subject: Optional[InnerNP] = None, doc_id: Optional[str] = None) -> Sentence:
        b = SentenceBuilder()
        root = self._rules.clause(b, subject)
        meta = {"generator": "grammar", "seed": self.seed, **agreement_meta(b)}
        coref: Optional[list[list[Mention]]] = [] if doc_id is not None else None
        return b.build(root, sentence_id, meta, coref=coref, doc_id=doc_id)

    def sentence(self) -> Sentence:
        """One new sentence."""
        return self._sentence(self._next_id("s"))

    def sentences(self, k: int) -> list[Sentence]:
        """``k`` new sentences."""
        if k < 0:
            raise ValueError(f"GrammarGenerator.sentences: k must be >= 0, got {k}")
        return [self.sentence() for _ in range(k)]

    def agreement_sentences(self, k: int, attractors: int | Iterable[int] = (0, 1, 2, 3)) -> list[Sentence]:
        """``k`` sentences whose subject NP holds exactly the requested number of attractors.

        Args:
            k: number of sentences.
            attractors: one count, or counts used in turn (sentence ``i`` gets ``counts[i % len(counts)]``).

        Returns:
            Sentences with ``meta["num_attractors"]`` equal to the requested count and ``meta["verb_index"]``,
            ``meta["subject_index"]``, ``meta["verb_number"]``, ``meta["wrong_verb_form"]`` for the task.
        """
        counts = [attractors] if isinstance(attractors, int) else list(attractors)
        if k < 0 or not counts or any(not isinstance(c, int) or c < 0 for c in counts):
            raise ValueError(f"agreement_sentences: need k >= 0 and attractor counts >= 0, got k={k}, {attractors!r}")
        out = []
        for i in range(k):
            number, plan = plan_subject(self._rules, counts[i % len(counts)])
            subject: InnerNP = lambda b, n=number, p=plan: planned_np(self._rules, b, n, p)  # noqa: E731
            sentence = self._sentence(self._next_id("agr"), subject)
            if sentence.meta["num_attractors"] != counts[i % len(counts)]:
                raise RuntimeError(f"generator bug: {sentence.id!r} has the wrong number of attractors")
            out.append(sentence)
        return out

    def document(self, num_sentences: int = 5) -> Document:
        """A document whose main-clause subjects/objects re-mention earlier entities (pronouns agreeing in
        number and gender, or definite NPs); ``Document.coref`` holds the gold chains (entities mentioned at
        least twice) as document-level spans with head words. Each sentence's own ``coref`` is ``[]``: no
        entity is mentioned twice within one sentence."""
        if num_sentences < 1:
            raise ValueError(f"GrammarGenerator.document: num_sentences must be >= 1, got {num_sentences}")
        doc_id = self._next_id("doc")
        discourse = self._rules.discourse = Discourse()
        try:
            sentences, offset = [], 0
            for i in range(num_sentences):
                discourse.start_sentence(offset)
                sentences.append(self._sentence(f"{doc_id}-{i}", doc_id=doc_id))
                offset += len(sentences[-1])
        finally:
            self._rules.discourse = None
        return Document(sentences, coref=discourse.clusters(), id=doc_id)
