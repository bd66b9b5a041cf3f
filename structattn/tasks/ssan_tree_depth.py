"""``ssan_tree_depth``: the maximum depth of the dependency tree, in bins (Conneau et al. 2018; SSAN)."""

from __future__ import annotations

from typing import Any, Sequence

from structattn.tasks.ssan_data import DEPENDENCY_DEPTH_BINS, ProbeExample, tree_depth_examples
from structattn.tasks.base import register_task
from structattn.tasks.ssan_base import SsanTask
from structattn.structures.sentence import Sentence


@register_task("ssan_tree_depth")
class SsanTreeDepth(SsanTask):
    """Sentence classification of the maximum dependency depth into ``len(bins) + 1`` classes.

    Args:
        bins: class upper bounds (default :data:`~structattn.tasks.ssan_data.DEPENDENCY_DEPTH_BINS`,
            the quartiles of the bundled Czech PUD: ``<= 3``, ``4``, ``5``, ``>= 6``).
        balance: downsample each split's classes to its smallest one.
        seed, ``**treebank``: see :class:`~structattn.tasks.ssan_base.SsanTask`.
    """

    output = "sentence"
    probe = "tree_depth"

    def __init__(self, bins: Sequence[int] = DEPENDENCY_DEPTH_BINS, balance: bool = True, **options: Any) -> None:
        if list(bins) != sorted(set(bins)):
            raise ValueError(f"task 'ssan_tree_depth': bins must be strictly increasing, got {list(bins)}")
        super().__init__(**options)
        self.bins, self.balance = tuple(bins), balance

    def options(self) -> dict[str, Any]:
        return {"bins": self.bins, "balance": self.balance, **super().options()}

    @property
    def num_labels(self) -> int:
        return len(self.bins) + 1

    def build(self, split: str, sentences: list[Sentence], seed: int) -> list[ProbeExample]:
        return tree_depth_examples(sentences, seed, bins=self.bins, source="dependency", balance=self.balance)
