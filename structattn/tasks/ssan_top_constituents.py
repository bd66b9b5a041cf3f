"""``ssan_top_constituents``: the sequence of the root's dependents (Conneau et al.'s top constituents,
dependency analogue; SSAN probing, Geng et al. 2020)."""

from __future__ import annotations

from typing import Any, Sequence

from structattn.tasks.ssan_data import (
    CORE_RELATIONS,
    OTHER,
    ProbeExample,
    top_classes,
    top_constituent_examples,
    top_sequence,
)
from structattn.tasks.base import register_task
from structattn.tasks.ssan_base import SsanTask
from structattn.structures.sentence import Sentence


@register_task("ssan_top_constituents")
class SsanTopConstituents(SsanTask):
    """Sentence classification: the ``num_classes - 1`` most frequent train-split sequences of the root's
    relations (see :func:`~structattn.tasks.ssan_data.top_sequence`) are classes ``0..num_classes-2`` (by
    frequency), everything else is ``OTHER`` (the last class).

    The default is the coarse analogue on :data:`~structattn.tasks.ssan_data.CORE_RELATIONS`: the order
    of subject, objects and clausal complements around the predicate (``"nsubj ROOT obj"``), 5 classes,
    each split balanced. On the bundled Czech PUD the full sequence (``relations="all"``, punctuation and
    adjuncts included) takes 509 distinct values over 800 train sentences: with 20 classes ``OTHER`` holds
    three quarters of them and no split can be balanced. The core sequence takes 24; its four most frequent
    (train: 265 / 137 / 104 / 81 sentences, ``OTHER`` 213) make five classes that balance to 81 each
    (405 train, 50 dev, 40 test examples with the default 10% splits).

    Args:
        num_classes: named classes plus ``OTHER``.
        relations: ``"core"`` (:data:`~structattn.tasks.ssan_data.CORE_RELATIONS`), ``"all"`` (every
            dependent of the root), or a list of relation names.
        balance: downsample each split's classes to its smallest one (seeded).
        max_per_class: keep at most this many examples of each class per split (seeded).
        seed, ``**treebank``: see :class:`~structattn.tasks.ssan_base.SsanTask`.
    """

    output = "sentence"
    probe = "top_constituents"
    requires = ("heads", "deprels")

    def __init__(self, num_classes: int = 5, relations: str | Sequence[str] = "core", balance: bool = True,
                 max_per_class: int | None = None, **options: Any) -> None:
        if num_classes < 2:
            raise ValueError(f"task 'ssan_top_constituents': num_classes must be >= 2, got {num_classes}")
        if isinstance(relations, str) and relations not in ("core", "all"):
            raise ValueError(f"task 'ssan_top_constituents': relations must be 'core', 'all' or a list of "
                             f"relation names, got {relations!r}")
        super().__init__(**options)
        self.num_classes, self.max_per_class, self.balance = num_classes, max_per_class, bool(balance)
        self.relations = relations if isinstance(relations, str) else tuple(relations)
        self.classes: list[str] | None = None

    def options(self) -> dict[str, Any]:
        return {"num_classes": self.num_classes, "relations": self.relations, "balance": self.balance,
                "max_per_class": self.max_per_class, **super().options()}

    @property
    def num_labels(self) -> int:
        return self.num_classes

    def _relations(self) -> tuple[str, ...] | None:
        return {"core": CORE_RELATIONS, "all": None}.get(self.relations, self.relations)  # type: ignore[arg-type]

    def build(self, split: str, sentences: list[Sentence], seed: int) -> list[ProbeExample]:
        relations = self._relations()
        if split == "train":
            self.classes = top_classes([" ".join(top_sequence(s, "dependency", relations)) for s in sentences],
                                       self.num_classes)
        if self.classes is None:
            raise RuntimeError(f"task {self.name!r}: the train split must be built first")
        try:
            return top_constituent_examples(sentences, seed, classes=self.classes, source="dependency",
                                            max_per_class=self.max_per_class, relations=relations,
                                            balance=self.balance)
        except ValueError as err:
            raise ValueError(f"task {self.name!r}, {split} split: {err}") from None

    def encode(self, item: Sentence, label: str) -> int:
        if self.classes is None:
            self.splits()  # the classes come from the train split
        assert self.classes is not None
        return self.num_classes - 1 if label == OTHER else self.classes.index(label)

