"""``ssan_word_reordering``: which word was moved, and from where? (Yang et al. 2019; SSAN, Geng et al. 2020)."""

from __future__ import annotations

from structattn.probes.ssan_probes import ProbeExample, reorder_token_labels, word_reordering_examples
from structattn.probes.task import register_task
from structattn.probes.tasks.ssan_base import SsanTask
from structattn.structures.sentence import Sentence


@register_task("ssan_word_reordering")
class SsanWordReordering(SsanTask):
    """Word reordering detection as token tagging: 1 on the moved (inserted) word, 2 at the index it came
    from, 0 elsewhere (:func:`~structattn.probes.ssan_probes.reorder_token_labels`). Yang et al. use two
    softmaxes over positions instead; token accuracy here is dominated by the 0 tags, so compare it with
    the majority baseline (all 0) the results table reports.

    Args:
        seed, **treebank: see :class:`~structattn.probes.tasks.ssan_base.SsanTask`.
    """

    output = "token"
    probe = "word_reordering"

    @property
    def num_labels(self) -> int:
        return 3

    def build(self, split: str, sentences: list[Sentence], seed: int) -> list[ProbeExample]:
        return word_reordering_examples(sentences, seed)

    def encode(self, item: Sentence, label: tuple[int, int]) -> list[int]:
        return reorder_token_labels(len(item), label)
