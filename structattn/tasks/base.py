"""The Task protocol: where a task's data comes from, what it predicts, and its baseline.

A task is one small class registered by name::

    @register_task("my_task")
    class MyTask(Task):
        output = "token"                        # "sentence" | "token" | "pair": which head the model gets
        requires = ("heads",)                   # annotations ``label`` reads (checked per item)

        def __init__(self, limit: int | None = None): ...   # options are plain keyword arguments; options()
                                                # lists them (they name the task in run ids and checkpoints)
        def splits(self): return {"train": [...], "dev": [...], "test": [...]}   # Sentence or Document
        def label(self, item): return [...]     # see the table below
        @property
        def num_labels(self): return 5

Labels by ``output`` (``-100`` marks a target to ignore):

=========  ==========================  ===========================================================
output     ``label(item)``             head logits
=========  ==========================  ===========================================================
sentence   ``int`` class               ``(b, num_labels)``
token      ``list[int]``, one per word ``(b, w, num_labels)``
pair       ``list[int]``, one per word ``(b, w, w)``: for word i, which word j (cross-entropy over j)
=========  ==========================  ===========================================================

So one cross-entropy and one argmax accuracy serve every task. ``inputs(item)`` gives the words the model
reads (default ``item.words``); ``baseline`` the majority-class accuracy the results table reports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from typing import Any, ClassVar, Sequence, Union

from structattn.registry import Registry
from structattn.structures.options import DerivedOptions
from structattn.structures.sentence import Document, Sentence

#: what a task reads: one sentence, or a document of several
Item = Union[Sentence, Document]
#: what ``Task.label`` returns: one class, or one per word (see the module docstring)
Label = Union[int, list[int]]
#: the values of ``Task.output``: which head the model gets
OUTPUTS = ("sentence", "token", "pair")
#: a label that is not scored (cross-entropy's ``ignore_index``)
IGNORE = -100

TASKS: Registry["Task"] = Registry("task", builtin="structattn.tasks.builtin")
register_task = TASKS.register


def get_task(name: str, **options: Any) -> "Task":
    """Build the task registered as ``name`` with its ``options`` (a bad option: ``ValueError`` naming it)."""
    return TASKS.build(name, **options)


def task_names() -> list[str]:
    """Names of every registered task."""
    return TASKS.names()


class Task(DerivedOptions, ABC):
    """Base class of tasks (see the module docstring for the protocol).

    ``options()`` returns the constructor's arguments (defaults applied) unless a subclass overrides it; an
    override that leaves out an argument set to a non-default value raises ``ValueError`` naming the task and
    the argument (see :mod:`structattn.structures.options`); ``options_ignored`` names arguments that cannot
    change the data (kept out of run ids).

    Class attributes:
        output: ``"sentence"``, ``"token"`` or ``"pair"``.
        requires: annotations ``label`` reads; items lacking one are rejected with their id.
        metric: name of the reported score (argmax accuracy over non-ignored targets).
    """

    name: ClassVar[str]
    output: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()
    metric: ClassVar[str] = "accuracy"

    @abstractmethod
    def splits(self) -> dict[str, list[Item]]:
        """The ``"train"``, ``"dev"`` and ``"test"`` items, deterministic for the given options."""

    @abstractmethod
    def label(self, item: Item) -> Label:
        """The target of one item (see the module docstring)."""

    @property
    def num_labels(self) -> int:
        """Number of classes (unused for ``pair`` tasks, whose classes are the words)."""
        return 0

    def inputs(self, item: Item) -> list[str]:
        """The words the model reads."""
        return list(item.words)

    def check(self, item: Item) -> None:
        """Raise ``ValueError`` naming the item when it lacks an annotation the task reads."""
        for annotation in self.requires:
            if getattr(item, annotation, None) is None:
                raise ValueError(f"task {self.name!r} needs {annotation!r}, but item {item.id!r} has none")

    def baseline(self, train: Sequence[Label], test: Sequence[Label]) -> float | None:
        """Accuracy on ``test`` of always predicting the most frequent ``train`` label (``None`` for pairs)."""
        if self.output == "pair":
            return None
        flat_train, flat_test = _flatten(train), _flatten(test)
        if not flat_train or not flat_test:
            return None
        majority = Counter(flat_train).most_common(1)[0][0]
        return sum(y == majority for y in flat_test) / len(flat_test)


def _flatten(labels: Sequence[Label]) -> list[int]:
    out: list[int] = []
    for y in labels:
        out.extend(y if isinstance(y, list) else [y])
    return [y for y in out if y != IGNORE]
