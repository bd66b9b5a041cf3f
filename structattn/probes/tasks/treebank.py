"""Shared base of tasks read from a dependency treebank (the bundled Czech PUD by default)."""

from __future__ import annotations

from typing import Any

from structattn.probes.task import Item, Task
from structattn.structures.sentence import Sentence


def load_treebank(source: str, limit: int | None) -> list[Sentence]:
    """Sentences of ``source``: ``"bundled"`` (gold Czech PUD shipped with the package) or a CoNLL-U path."""
    if source == "bundled":
        from structattn.structures.readers.bundled import load_bundled

        return list(load_bundled(limit))
    from structattn.structures import read_conllu

    sentences = list(read_conllu(source))
    return sentences[:limit] if limit is not None else sentences


class TreebankTask(Task):
    """Items from a treebank, split into contiguous train / dev / test blocks (the last sentences are test).

    Args:
        source: ``"bundled"`` or a CoNLL-U path.
        limit: use only the first ``limit`` sentences.
        dev_fraction, test_fraction: sizes of the dev and test blocks.
    """

    requires = ("heads",)

    def __init__(self, source: str = "bundled", limit: int | None = None, dev_fraction: float = 0.1,
                 test_fraction: float = 0.1) -> None:
        if not (0 < dev_fraction < 1 and 0 < test_fraction < 1 and dev_fraction + test_fraction < 1):
            raise ValueError(f"task {self.name!r}: need 0 < dev_fraction, test_fraction and their sum < 1, got "
                             f"{dev_fraction}, {test_fraction}")
        if limit is not None and limit < 3:
            raise ValueError(f"task {self.name!r}: limit must be >= 3 (one sentence per split), got {limit}")
        self.source, self.limit = source, limit
        self.dev_fraction, self.test_fraction = dev_fraction, test_fraction
        self._splits: dict[str, list[Item]] | None = None

    def options(self) -> dict[str, Any]:
        return {"source": self.source, "limit": self.limit, "dev_fraction": self.dev_fraction,
                "test_fraction": self.test_fraction}

    def splits(self) -> dict[str, list[Item]]:
        if self._splits is None:
            sentences = load_treebank(self.source, self.limit)
            for s in sentences:
                self.check(s)
            n = len(sentences)
            n_test = max(1, round(n * self.test_fraction))
            n_dev = max(1, round(n * self.dev_fraction))
            if n - n_test - n_dev < 1:
                raise ValueError(f"task {self.name!r}: {n} sentences are too few for train/dev/test")
            cut = n - n_test - n_dev
            self._splits = {"train": sentences[:cut], "dev": sentences[cut:cut + n_dev], "test": sentences[cut + n_dev:]}
        return self._splits
