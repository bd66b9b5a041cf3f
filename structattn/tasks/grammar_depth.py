"""``grammar_depth``: depth tagging on synthetic-grammar sentences, with a free training-set size."""

from __future__ import annotations

from typing import Any

from structattn.structures.trees import tree_depths
from structattn.tasks.base import register_task
from structattn.tasks.synthetic import SyntheticTask
from structattn.structures.generators import GrammarGenerator
from structattn.structures.sentence import Sentence


@register_task("grammar_depth")
class GrammarDepth(SyntheticTask):
    """Tag every word with its dependency-tree depth (root = 0), clipped to ``max_depth``, on sentences of
    the synthetic grammar. Unlike ``depth_tagging`` (a fixed treebank) the training set can grow while dev
    and test stay fixed, which the low-resource comparison needs.

    Args:
        max_depth: depths above it are labelled ``max_depth`` (classes ``0..max_depth``).
        grammar_depth: embedding depth of the grammar (see :class:`GrammarGenerator`'s ``max_depth``).
        train, dev, test, seed: see :class:`~structattn.tasks.synthetic.SyntheticTask`.
    """

    output = "token"
    requires = ("heads",)

    def __init__(self, max_depth: int = 5, grammar_depth: int = 3, **sizes: Any) -> None:
        if max_depth < 1:
            raise ValueError(f"task 'grammar_depth': max_depth must be >= 1, got {max_depth}")
        super().__init__(**sizes)
        self.max_depth, self.grammar_depth = max_depth, grammar_depth

    def options(self) -> dict[str, Any]:
        return {"max_depth": self.max_depth, "grammar_depth": self.grammar_depth, **super().options()}

    @property
    def num_labels(self) -> int:
        return self.max_depth + 1

    def generate(self, split: str, k: int, seed: int) -> list[Sentence]:
        return GrammarGenerator(seed, max_depth=self.grammar_depth).sentences(k)

    def label(self, item: Sentence) -> list[int]:
        self.check(item)
        return [min(d, self.max_depth) for d in tree_depths(item.heads)]
