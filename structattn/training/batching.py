"""Length-bucketed batching: sentences of similar length go together, so little of a batch is padding."""

from __future__ import annotations

import random
from typing import Sequence

from structattn.structures.sentence import describe_sentence


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
        batch_size: examples per batch (not used when ``batch_tokens`` is given).
        batch_tokens: instead of a fixed number of examples, batches of at most this many padded tokens
            (examples x the longest length in the batch): with length-sorted pools, steps then cost about the
            same whatever the sentence length, and carry little padding. A pool is cut greedily in length
            order; every example is still in exactly one batch per epoch. An example longer than
            ``batch_tokens`` is refused (``ValueError`` naming it, by ``ids`` when given, with the least
            ``batch_tokens`` that takes every example).
        shuffle: training order (see above) or evaluation order.
        seed: base seed of the training order.
        pool_batches: how many batches a sorting pool spans (larger: less padding, less randomness).
        rank, world_size: this process's place among the data-parallel processes.
        ids: the sentence id of every example, for error messages (default: examples named by index).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        batch_tokens: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        pool_batches: int = 50,
        rank: int = 0,
        world_size: int = 1,
        ids: Sequence[str | None] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside 0..{world_size - 1}")
        if not lengths:
            raise ValueError("LengthBucketSampler: no examples")
        self.lengths = list(lengths)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.batch_tokens = batch_tokens
        if batch_tokens is not None:
            if batch_tokens < 1:
                raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
            self._check_fits(batch_tokens, ids)
            mean = max(1, round(sum(self.lengths) / len(self.lengths)))
            batch_size = max(1, batch_tokens // mean)  # the pool spans about pool_batches batches
        self.pool = max(1, pool_batches) * batch_size
        self.rank, self.world_size = rank, world_size
        if shuffle and len(self._all_batches(0)) < world_size:
            raise ValueError(f"{len(self.lengths)} examples make fewer batches of {batch_size} than {world_size} processes")

    def _check_fits(self, batch_tokens: int, ids: Sequence[str | None] | None) -> None:
        """``ValueError`` naming the longest example when it alone is over ``batch_tokens``."""
        longest = max(range(len(self.lengths)), key=lambda i: (self.lengths[i], -i))
        if self.lengths[longest] <= batch_tokens:
            return
        over = sum(n > batch_tokens for n in self.lengths)
        who = f"example {longest}"
        if ids is not None and len(ids) == len(self.lengths) and ids[longest] is not None:
            who = f"{describe_sentence(ids[longest])} (example {longest})"
        others = f" ({over - 1} other example(s) are over it too)" if over > 1 else ""
        raise ValueError(f"{who} has {self.lengths[longest]} tokens, more than batch_tokens = {batch_tokens}{others}: "
                         f"raise batch_tokens to at least {self.lengths[longest]}, or leave such examples out of the "
                         "data")

    def _all_batches(self, epoch: int) -> list[list[int]]:
        order = list(range(len(self.lengths)))
        if not self.shuffle:
            order.sort(key=lambda i: (self.lengths[i], i))
            return self._cut(order)
        rng = random.Random(self.seed * 1_000_003 + epoch)
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), self.pool):
            batches.extend(self._cut(sorted(order[start:start + self.pool], key=lambda i: self.lengths[i])))
        rng.shuffle(batches)
        return batches[: len(batches) - len(batches) % self.world_size]

    def _cut(self, ordered: list[int]) -> list[list[int]]:
        """Consecutive batches of ``ordered`` (sorted by length): ``batch_size`` examples each, or as many as
        fit ``batch_tokens`` padded tokens."""
        if self.batch_tokens is None:
            return [ordered[k:k + self.batch_size] for k in range(0, len(ordered), self.batch_size)]
        batches: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for i in ordered:
            grown = max(longest, self.lengths[i])
            if current and grown * (len(current) + 1) > self.batch_tokens:
                batches.append(current)
                current, grown = [], self.lengths[i]
            current.append(i)
            longest = grown
        if current:
            batches.append(current)
        return batches

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """This rank's batches of ``epoch``."""
        return self._all_batches(epoch)[self.rank::self.world_size]

    def __len__(self) -> int:
        return len(self.batches(0))


def padding_share(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """The share of padding in ``batches`` of examples of ``lengths``: 1 - real tokens / (examples x longest),
    summed over the batches."""
    real = sum(lengths[i] for b in batches for i in b)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches if b)
    return 1.0 - real / padded if padded else 0.0
