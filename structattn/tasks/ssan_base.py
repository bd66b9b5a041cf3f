"""Shared base of the SSAN probing tasks: a treebank split first, then each split turned into labelled
examples by a builder of :mod:`structattn.tasks.ssan_data` (so no source sentence crosses splits).

The derived sentences carry their label in ``meta["label"]`` (and the builder in ``meta["probe"]``);
:meth:`SsanTask.label` reads it back and encodes it for the task's ``output``.
"""

from __future__ import annotations

from typing import Any, Hashable

from structattn.tasks.ssan_data import ProbeExample
from structattn.tasks.base import Item, Label
from structattn.tasks.treebank import TreebankTask
from structattn.structures.sentence import Sentence

SPLITS = ("train", "dev", "test")


class SsanTask(TreebankTask):
    """Treebank sentences -> probing examples, split by split.

    Args:
        seed: seeds the builder; split ``k`` (train, dev, test) uses ``seed + k``.
        **treebank: ``source``, ``limit``, ``dev_fraction``, ``test_fraction``, ``parser``, ``cache`` (see
            :class:`TreebankTask`).
    """

    #: the ``meta["probe"]`` value written by the builder
    probe: str = ""

    def __init__(self, seed: int = 0, **treebank: Any) -> None:
        super().__init__(**treebank)
        self.seed = seed
        self._examples: dict[str, list[Item]] | None = None

    def options(self) -> dict[str, Any]:
        return {"seed": self.seed, **super().options()}

    def build(self, split: str, sentences: list[Sentence], seed: int) -> list[ProbeExample]:
        """Hook: the examples of one split."""
        raise NotImplementedError

    def encode(self, item: Sentence, label: Hashable) -> Label:
        """Hook: the builder's label as the task's target (default: the label itself)."""
        return label  # type: ignore[return-value]

    def splits(self) -> dict[str, list[Item]]:
        if self._examples is None:
            sources = super().splits()
            self._examples = {
                name: [e.sentence for e in self.build(name, list(sources[name]), self.seed + k)]
                for k, name in enumerate(SPLITS)
            }
        return self._examples

    def label(self, item: Sentence) -> Label:
        if item.meta.get("probe") != self.probe or "label" not in item.meta:
            raise ValueError(
                f"task {self.name!r}: item {item.id!r} is not one of its examples (meta probe "
                f"{item.meta.get('probe')!r}, expected {self.probe!r}); take items from splits()"
            )
        return self.encode(item, item.meta["label"])
