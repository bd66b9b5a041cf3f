"""Length-bucketed batches: coverage, grouping, determinism, data-parallel shards."""

import random

import pytest

from structattn.training import LengthBucketSampler


@pytest.fixture
def lengths():
    rng = random.Random(0)
    return [rng.randint(1, 60) for _ in range(500)]


def padding(batches, lengths):
    return sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)


def test_every_example_once_and_similar_lengths_together(lengths):
    sampler = LengthBucketSampler(lengths, batch_size=16, seed=3, pool_batches=10)
    batches = sampler.batches(0)
    assert sorted(i for b in batches for i in b) == list(range(500))
    shuffled = list(range(500))
    random.Random(1).shuffle(shuffled)
    unsorted = [shuffled[k:k + 16] for k in range(0, 500, 16)]
    assert padding(batches, lengths) < 0.2 * padding(unsorted, lengths)


def test_deterministic_per_seed_and_epoch(lengths):
    a = LengthBucketSampler(lengths, 16, seed=3)
    assert a.batches(0) == LengthBucketSampler(lengths, 16, seed=3).batches(0)
    assert a.batches(0) != a.batches(1)
    assert a.batches(0) != LengthBucketSampler(lengths, 16, seed=4).batches(0)


def test_data_parallel_ranks_split_the_epoch(lengths):
    ranks = [LengthBucketSampler(lengths, 16, seed=3, rank=r, world_size=3).batches(2) for r in range(3)]
    assert len({len(r) for r in ranks}) == 1  # same number of steps on every rank
    seen = [i for r in ranks for b in r for i in b]
    assert len(seen) == len(set(seen))  # disjoint
    whole = LengthBucketSampler(lengths, 16, seed=3).batches(2)
    assert sorted(map(tuple, (b for r in ranks for b in r))) == sorted(map(tuple, whole[: len(whole) - len(whole) % 3]))


def test_evaluation_order_is_sorted_and_complete(lengths):
    shards = [LengthBucketSampler(lengths, 50, shuffle=False, rank=r, world_size=2).batches() for r in range(2)]
    assert sorted(i for s in shards for b in s for i in b) == list(range(500))
    first = shards[0][0]
    assert max(lengths[i] for i in first) <= min(lengths[i] for i in shards[1][0])


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        LengthBucketSampler([3], 0)
    with pytest.raises(ValueError, match="rank 2 outside"):
        LengthBucketSampler([3], 1, rank=2, world_size=2)
    with pytest.raises(ValueError, match="fewer batches"):
        LengthBucketSampler([3, 4], 2, world_size=2)
