"""``BucketBiasSDPA``'s backward with blocks capped by the head dim (``_block_shape(h, n, d)``: at most
``max(BLOCK_ELEMENTS / 4, 2 h n d)`` scores per block) against the float64 per-query oracle of ``soft_bias``: a
sentence of prime length split into row blocks that do not divide it, a padded second sentence, shared and
per-head tables, on 1 and 2 threads: worker threads (``PARALLEL_PAIRS = POOL_TASKS_PER_THREAD = 0``: per-sentence loops on
:func:`per_sentence` workers, even for these short sentences) or the calling thread (the default below
``PARALLEL_PAIRS``)."""

from __future__ import annotations

import pytest
import torch

from structattn.attention import bucket_bias as bb
from tests.attention.cases import dependency_structure, random_qkv
from tests.attention.cases.soft_bias import assert_matches_oracle, make

B, H, N, D = 2, 3, 37, 2  # h n d = 222 scores
BLOCK = 800  # capped at max(200, 2 * 222): blocks of 4 rows (444 // (3 * 37)), the last one of 1 row; 7 uncapped


def test_head_dim_caps_the_block(monkeypatch):
    assert bb._block_shape(8, 256, 64) == (256, 8, 128)  # benchmark shapes: 1 MiB blocks for short sentences
    assert bb._block_shape(8, 512, 64) == (512, 2, 512)  # 2 MiB from n = 512 (twice q: 2 h n d)
    assert bb._block_shape(8, 1024, 64) == (1024, 1, 1024)  # 4 MiB: the whole sentence, one head at a time
    monkeypatch.setattr(bb, "BLOCK_ELEMENTS", BLOCK)
    assert bb._block_shape(H, N, D) == (N, H, 4)
    assert bb._block_shape(H, N) == (N, H, 7)  # without d: BLOCK_ELEMENTS alone


@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("num_threads", [1, 2])
@pytest.mark.parametrize("on_workers", [True, False])
def test_capped_blocks_match_the_oracle(per_head, num_threads, on_workers, generator, monkeypatch):
    monkeypatch.setattr(bb, "BLOCK_ELEMENTS", BLOCK)
    if on_workers:
        monkeypatch.setattr(bb, "PARALLEL_PAIRS", 0)
        monkeypatch.setattr(bb, "POOL_TASKS_PER_THREAD", 0)
    module = make(H, D, per_head=per_head).double()
    structure = dependency_structure([N, 20], generator, forests=True)
    q, k, v = random_qkv(B, H, N, D, generator)
    threads = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        assert_matches_oracle(module, q, k, v, structure, generator)
    finally:
        torch.set_num_threads(threads)


def test_worker_pool_only_for_enough_or_large_tasks(monkeypatch):
    """_for_sentences uses the worker pool for >= 2 tasks per thread or sentences of >= LARGE_PAIRS pairs, and
    the calling thread otherwise; either way it returns every result in order."""
    pooled = []
    monkeypatch.setattr(bb, "per_sentence", lambda fn, items, device: pooled.append(len(items)) or [fn(x) for x in items])
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    cpu = torch.device("cpu")
    assert bb._for_sentences(lambda x: x * 10, range(3), 512 * 512, cpu) == [0, 10, 20] and pooled == []
    assert bb._for_sentences(lambda x: x, range(4), 512 * 512, cpu) == [0, 1, 2, 3] and pooled == [4]
    assert bb._for_sentences(lambda x: x, range(2), 1024 * 1024, cpu) == [0, 1] and pooled == [4, 2]
    assert bb._for_sentences(lambda x: x, range(8), 128 * 128, cpu) == list(range(8)) and pooled == [4, 2]
