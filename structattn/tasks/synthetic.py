"""Shared base of tasks drawn from a seeded generator: fixed train / dev / test sizes, one seed per split."""

from __future__ import annotations

from typing import Any

from structattn.tasks.base import Item, Task

SPLITS = ("train", "dev", "test")


class SyntheticTask(Task):
    """Items from a generator; split ``k`` (train, dev, test) draws from seed ``seed + 1000 * k``, so no
    item is shared between splits and growing ``train`` keeps dev and test unchanged.

    Args:
        train, dev, test: number of items per split (each >= 1).
        seed: base seed of the generator.
    """

    def __init__(self, train: int = 1000, dev: int = 200, test: int = 400, seed: int = 0) -> None:
        sizes = {"train": train, "dev": dev, "test": test}
        bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or v < 1}
        if bad:
            raise ValueError(f"task {self.name!r}: split sizes must be integers >= 1, got {bad}")
        self.sizes, self.seed = sizes, seed
        self._splits: dict[str, list[Item]] | None = None

    def options(self) -> dict[str, Any]:
        return {**self.sizes, "seed": self.seed}

    def generate(self, split: str, k: int, seed: int) -> list[Item]:
        """Hook: ``k`` items of ``split`` drawn with ``seed``."""
        raise NotImplementedError

    def splits(self) -> dict[str, list[Item]]:
        if self._splits is None:
            self._splits = {name: self.generate(name, self.sizes[name], self.seed + 1000 * k)
                            for k, name in enumerate(SPLITS)}
            for items in self._splits.values():
                for item in items:
                    self.check(item)
        return self._splits
