"""``head_selection``: for every word, point at its dependency head (the root points at itself)."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from structattn.tasks.base import IGNORE, Label, register_task
from structattn.tasks.treebank import TreebankTask
from structattn.structures.sentence import Sentence


@register_task("head_selection")
class HeadSelection(TreebankTask):
    """A token-pair task: score every (word, candidate head) pair; accuracy is the unlabelled attachment
    score (UAS). The baseline attaches every word at the most frequent relative offset of the train split.

    Args:
        **treebank: ``source``, ``limit``, ``dev_fraction``, ``test_fraction``, ``parser``, ``cache``, ``trees`` (see
            :class:`TreebankTask`).
    """

    output = "pair"
    parsed_trees = True

    def label(self, item: Sentence) -> list[int]:
        self.check(item)
        return [i if h == -1 else h for i, h in enumerate(self.gold_heads(item))]

    def baseline(self, train: Sequence[Label], test: Sequence[Label]) -> float | None:
        offsets = Counter(h - i for y in train for i, h in enumerate(y) if h != IGNORE and h != i)
        if not offsets:
            return None
        offset = offsets.most_common(1)[0][0]
        pairs = [(i, h) for y in test for i, h in enumerate(y) if h != IGNORE]
        return sum(h == i + offset for i, h in pairs) / len(pairs)
