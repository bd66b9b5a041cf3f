"""``ssan_word_reordering``: which word was moved, and from where? (Yang et al. 2019; SSAN, Geng et al. 2020)."""

from __future__ import annotations

from typing import Any

from structattn.tasks.ssan_data import ProbeExample, reorder_token_labels, word_reordering_examples
from structattn.tasks.base import register_task
from structattn.tasks.ssan_base import SsanTask
from structattn.structures.sentence import Sentence

SCORING = ("balanced", "all")


@register_task("ssan_word_reordering")
class SsanWordReordering(SsanTask):
    """Word reordering detection as token tagging: 1 on the moved (inserted) word, 2 at the index it came
    from, 0 for a word left in place (:func:`~structattn.tasks.ssan_data.reorder_token_labels`). Yang et
    al. use two softmaxes over positions instead.

    Args:
        scoring: ``"balanced"`` (default) scores three words per sentence, the inserted one, the origin and
            one untouched control word drawn uniformly at build time, and ignores the rest: one target per
            class per sentence, so the majority baseline is 1/3 and accuracy measures detection. Sentences
            of two words have no control word and are left out of every split (the bundled treebank has
            none). ``"all"`` tags every word (0 almost everywhere: the majority baseline is about .9).
        seed, ``**treebank``: see :class:`~structattn.tasks.ssan_base.SsanTask`.
    """

    output = "token"
    probe = "word_reordering"

    def __init__(self, scoring: str = "balanced", **options: Any) -> None:
        if scoring not in SCORING:
            raise ValueError(f"task 'ssan_word_reordering': scoring must be one of {SCORING}, got {scoring!r}")
        super().__init__(**options)
        self.scoring = scoring

    def options(self) -> dict[str, Any]:
        return {"scoring": self.scoring, **super().options()}

    @property
    def num_labels(self) -> int:
        return 3

    def build(self, split: str, sentences: list[Sentence], seed: int) -> list[ProbeExample]:
        examples = word_reordering_examples(sentences, seed)
        if self.scoring == "balanced":
            examples = [e for e in examples if e.sentence.meta["untouched"] is not None]
        return examples

    def encode(self, item: Sentence, label: tuple[int, int]) -> list[int]:
        untouched = item.meta["untouched"] if self.scoring == "balanced" else None
        return reorder_token_labels(len(item), label, untouched)
