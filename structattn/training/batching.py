"""Length-bucketed batching: sentences of similar length go together, so little of a batch is padding."""

from __future__ import annotations

import random
from typing import Sequence


class LengthBucketSampler:
    """Batches of example indices grouped by length.

    Training order (``shuffle=True``), per epoch: shuffle all indices with ``(seed, epoch)``, cut them into
    pools of ``pool_batches * batch_size``, sort each pool by length, cut pools into batches, shuffle the
    batch order. Evaluation order (``shuffle=False``): sorted by length, cut into batches.

    Data parallel: every rank computes the same batch list and takes every ``world_size``-th batch starting at
    its ``rank``. For training the list is first cut to a multiple of ``world_size`` so every rank makes the
    same number of steps; for evaluation nothing is dropped (ranks may get one batch more or less).

    Args:
        lengths: length of every example (tokens).
        batch_size: examples per batch.
        shuffle: training order (see above) or evaluation order.
        seed: base seed of the training order.
        pool_batches: how many batches a sorting pool spans (larger: less padding, less randomness).
        rank, world_size: this process's place among the data-parallel processes.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        pool_batches: int = 50,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside 0..{world_size - 1}")
        if not lengths:
            raise ValueError("LengthBucketSampler: no examples")
        self.lengths = list(lengths)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.pool = max(1, pool_batches) * batch_size
        self.rank, self.world_size = rank, world_size
        if shuffle and len(self._all_batches(0)) < world_size:
            raise ValueError(f"{len(self.lengths)} examples make fewer batches of {batch_size} than {world_size} processes")

    def _all_batches(self, epoch: int) -> list[list[int]]:
        order = list(range(len(self.lengths)))
        if not self.shuffle:
            order.sort(key=lambda i: (self.lengths[i], i))
            return [order[k:k + self.batch_size] for k in range(0, len(order), self.batch_size)]
        rng = random.Random(self.seed * 1_000_003 + epoch)
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), self.pool):
            pool = sorted(order[start:start + self.pool], key=lambda i: self.lengths[i])
            batches.extend(pool[k:k + self.batch_size] for k in range(0, len(pool), self.batch_size))
        rng.shuffle(batches)
        return batches[: len(batches) - len(batches) % self.world_size]

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """This rank's batches of ``epoch``."""
        return self._all_batches(epoch)[self.rank::self.world_size]

    def __len__(self) -> int:
        return len(self.batches(0))
