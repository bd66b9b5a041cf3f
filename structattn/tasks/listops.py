"""``listops``: the value (0-9) of a nested list expression (Nangia & Bowman 2018), class-balanced."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from structattn.tasks.base import register_task
from structattn.tasks.synthetic import SyntheticTask
from structattn.structures.generators import ListOpsGenerator
from structattn.structures.sentence import Sentence

NUM_VALUES = 10


@register_task("listops")
class ListOps(SyntheticTask):
    """Sentence classification into the expression's value, 10 classes. Each split holds every value
    equally often (up to one), so the majority baseline is ~0.1; expressions are drawn until each value's
    quota is filled. The gold tree (operator heads its arguments) is the ``dependency`` structure.

    Args:
        min_length, max_length: expression lengths in tokens (long ones for ``local_global``).
        max_depth, max_args: nesting and arguments per operator (see :class:`ListOpsGenerator`).
        train, dev, test, seed: see :class:`~structattn.tasks.synthetic.SyntheticTask`.
    """

    output = "sentence"
    requires = ("heads",)

    def __init__(self, min_length: int = 10, max_length: int = 50, max_depth: int = 4, max_args: int = 4,
                 **sizes: Any) -> None:
        super().__init__(**sizes)
        if not 4 <= min_length <= max_length:
            raise ValueError(f"task 'listops': need 4 <= min_length <= max_length, got {min_length}, {max_length}")
        self.min_length, self.max_length = min_length, max_length
        self.max_depth, self.max_args = max_depth, max_args

    def options(self) -> dict[str, Any]:
        return {"min_length": self.min_length, "max_length": self.max_length, "max_depth": self.max_depth,
                "max_args": self.max_args, **super().options()}

    @property
    def num_labels(self) -> int:
        return NUM_VALUES

    def generate(self, split: str, k: int, seed: int) -> list[Sentence]:
        generator = ListOpsGenerator(seed, max_depth=self.max_depth, max_args=self.max_args,
                                     min_length=self.min_length, max_length=self.max_length)
        quota = [k // NUM_VALUES + (v < k % NUM_VALUES) for v in range(NUM_VALUES)]
        pools: dict[int, list[Sentence]] = defaultdict(list)
        for _ in range(200 * k):
            if all(len(pools[v]) >= quota[v] for v in range(NUM_VALUES)):
                break
            s = generator.example()
            if len(pools[s.meta["value"]]) < quota[s.meta["value"]]:
                pools[s.meta["value"]].append(s)
        missing = {v: quota[v] - len(pools[v]) for v in range(NUM_VALUES) if len(pools[v]) < quota[v]}
        if missing:
            raise ValueError(f"task 'listops': split {split!r} could not be balanced; values still missing {missing} "
                             f"(lengths {self.min_length}-{self.max_length}, max_depth {self.max_depth})")
        # interleave the values so any prefix stays balanced
        return [pools[v][i] for i in range(max(quota)) for v in range(NUM_VALUES) if i < quota[v]]

    def label(self, item: Sentence) -> int:
        value = item.meta.get("value")
        if not isinstance(value, int) or not 0 <= value < NUM_VALUES:
            raise ValueError(f"task 'listops': sentence {item.id!r} has no value 0-9 in meta (got {value!r})")
        return value
