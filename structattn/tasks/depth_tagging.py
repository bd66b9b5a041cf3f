"""``depth_tagging``: tag every word with its depth in the dependency tree (root = 0), clipped."""

from __future__ import annotations

from typing import Any

from structattn.structures.trees import tree_depths
from structattn.tasks.base import register_task
from structattn.tasks.treebank import TreebankTask
from structattn.structures.sentence import Sentence


@register_task("depth_tagging")
class DepthTagging(TreebankTask):
    """Predict each word's tree depth, clipped to ``max_depth`` (classes ``0..max_depth``).

    Words alone say little about depth; the tree says everything, so this is a task where a structural
    prior should help (the depth probe of Hewitt & Manning, 2019, as a classification).

    Args:
        max_depth: depths above it are labelled ``max_depth``.
        **treebank: ``source``, ``limit``, ``dev_fraction``, ``test_fraction``, ``parser``, ``cache``, ``trees`` (see
            :class:`TreebankTask`).
    """

    output = "token"
    parsed_trees = True

    def __init__(self, max_depth: int = 5, **treebank: Any) -> None:
        if max_depth < 1:
            raise ValueError(f"task 'depth_tagging': max_depth must be >= 1, got {max_depth}")
        super().__init__(**treebank)
        self.max_depth = max_depth

    def options(self) -> dict[str, Any]:
        return {"max_depth": self.max_depth, **super().options()}

    @property
    def num_labels(self) -> int:
        return self.max_depth + 1

    def label(self, item: Sentence) -> list[int]:
        self.check(item)
        return [min(d, self.max_depth) for d in tree_depths(self.gold_heads(item))]
