"""``ssan_top_constituents``: the sequence of the root's dependents (Conneau et al.'s top constituents,
dependency analogue; SSAN probing, Geng et al. 2020)."""

from __future__ import annotations

from typing import Any

from structattn.probes.ssan_probes import OTHER, ProbeExample, top_constituent_examples
from structattn.probes.task import register_task
from structattn.probes.tasks.ssan_base import SsanTask
from structattn.structures.sentence import Sentence


@register_task("ssan_top_constituents")
class SsanTopConstituents(SsanTask):
    """Sentence classification: the ``num_classes - 1`` most frequent train-split sequences of the root's
    relations (``"nsubj ROOT obj punct"``, see :func:`~structattn.probes.ssan_probes.top_sequence`) are
    classes ``0..num_classes-2`` (by frequency), everything else is ``OTHER`` (the last class). On the
    bundled Czech PUD with 20 classes ``OTHER`` holds about three quarters of the sentences; lower
    ``num_classes`` or cap classes with ``max_per_class`` for a more even task.

    Args:
        num_classes: named classes plus ``OTHER``.
        max_per_class: keep at most this many examples of each class per split (seeded).
        seed, **treebank: see :class:`~structattn.probes.tasks.ssan_base.SsanTask`.
    """

    output = "sentence"
    probe = "top_constituents"
    requires = ("heads", "deprels")

    def __init__(self, num_classes: int = 20, max_per_class: int | None = None, **options: Any) -> None:
        if num_classes < 2:
            raise ValueError(f"task 'ssan_top_constituents': num_classes must be >= 2, got {num_classes}")
        super().__init__(**options)
        self.num_classes, self.max_per_class = num_classes, max_per_class
        self.classes: list[str] | None = None

    def options(self) -> dict[str, Any]:
        return {"num_classes": self.num_classes, "max_per_class": self.max_per_class, **super().options()}

    @property
    def num_labels(self) -> int:
        return self.num_classes

    def build(self, split: str, sentences: list[Sentence], seed: int) -> list[ProbeExample]:
        if split == "train":
            train = top_constituent_examples(sentences, seed, self.num_classes, source="dependency")
            self.classes = _by_frequency([e.label for e in train])
        if self.classes is None:
            raise RuntimeError(f"task {self.name!r}: the train split must be built first")
        return top_constituent_examples(sentences, seed, classes=self.classes, source="dependency",
                                        max_per_class=self.max_per_class)

    def encode(self, item: Sentence, label: str) -> int:
        if self.classes is None:
            self.splits()  # the classes come from the train split
        assert self.classes is not None
        return self.num_classes - 1 if label == OTHER else self.classes.index(label)


def _by_frequency(labels: list[str]) -> list[str]:
    counts: dict[str, int] = {}
    for y in labels:
        if y != OTHER:
            counts[y] = counts.get(y, 0) + 1
    return sorted(counts, key=lambda q: (-counts[q], q))
