"""``ssan_bigram_shift``: were two adjacent words swapped? (Conneau et al. 2018; SSAN probing, Geng et al. 2020)."""

from __future__ import annotations

from structattn.tasks.ssan_data import ProbeExample, bigram_shift_examples
from structattn.tasks.base import register_task
from structattn.tasks.ssan_base import SsanTask
from structattn.structures.sentence import Sentence


@register_task("ssan_bigram_shift")
class SsanBigramShift(SsanTask):
    """Sentence classification, classes 0 (intact) / 1 (one adjacent pair swapped), balanced per split.
    The tree follows the swapped words (see :mod:`structattn.tasks.ssan_data`).

    Args:
        seed, ``**treebank``: see :class:`~structattn.tasks.ssan_base.SsanTask`.
    """

    output = "sentence"
    probe = "bigram_shift"

    @property
    def num_labels(self) -> int:
        return 2

    def build(self, split: str, sentences: list[Sentence], seed: int) -> list[ProbeExample]:
        return bigram_shift_examples(sentences, seed)
