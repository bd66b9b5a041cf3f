"""The blocked backward of ``BucketBiasSDPA`` (spans, head groups, row blocks; bincount of the table
gradient on uint8 and int32 codes) against the float64 per-query oracle of ``soft_bias``."""

from __future__ import annotations

import pytest
import torch

from structattn.attention import bucket_bias as bb
from structattn.attention import threads as worker_threads
from tests.attention.cases import dependency_structure, random_qkv
from tests.attention.cases.soft_bias import assert_matches_oracle, make
from tests.attention.conftest import B, D, H
from tests.reference.soft_bias import soft_bias_reference

TOL = {"atol": 1e-9, "rtol": 1e-7}
N = 9  # pairwise distinct from B=2, H=3, D=5; the second sentence has 6 real tokens

#: (CHUNK_ELEMENTS, BLOCK_ELEMENTS) -> whole sentence and heads; 2-head groups (half a chunk) in 2-row blocks; 3-row
#: spans of single heads in blocks of 2 and 1 rows; everything 1.
SHAPES = [(None, None), (4 * N * N, 40), (30, 20), (3, 1)]


@pytest.mark.parametrize("chunk,block", SHAPES)
def test_block_shape_respects_its_limits(chunk, block, monkeypatch):
    if chunk is not None:
        monkeypatch.setattr(bb, "CHUNK_ELEMENTS", chunk)
        monkeypatch.setattr(bb, "BLOCK_ELEMENTS", block)
    span, heads, rows = bb._block_shape(H, N)
    assert 1 <= rows <= span <= N and 1 <= heads <= H
    assert span == 1 or span * N <= bb.CHUNK_ELEMENTS
    assert rows == 1 or heads * rows * N <= bb.BLOCK_ELEMENTS


def test_block_shapes_cover_groups_spans_and_blocks(monkeypatch):
    """The parametrisation above really reaches head groups, several spans and several blocks per span."""
    seen = []
    for chunk, block in SHAPES[1:]:
        monkeypatch.setattr(bb, "CHUNK_ELEMENTS", chunk)
        monkeypatch.setattr(bb, "BLOCK_ELEMENTS", block)
        seen.append(bb._block_shape(H, N))
    assert seen[0] == (N, 2, 2)  # one span, heads 0-1 then 2, blocks of 2 rows
    assert seen[1] == (3, 1, 2)  # 3 spans, single heads, blocks of 2 and 1 rows
    assert seen[2] == (1, 1, 1)


@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("chunk,block", SHAPES)
@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("max_distance", [3, 300])  # 300: more than 255 codes, stored as int32
def test_blocked_backward_matches_the_oracle(per_head, chunk, block, parallel, max_distance, generator,
                                             monkeypatch):
    if chunk is not None:
        monkeypatch.setattr(bb, "CHUNK_ELEMENTS", chunk)
        monkeypatch.setattr(bb, "BLOCK_ELEMENTS", block)
    monkeypatch.setattr(worker_threads, "PARALLEL_BLOCKS", parallel)
    if parallel:  # these sentences are short: without this their per-sentence loops stay in the calling thread
        monkeypatch.setattr(bb, "PARALLEL_PAIRS", 0)
        monkeypatch.setattr(bb, "POOL_TASKS_PER_THREAD", 0)
    module = make(H, D, per_head=per_head, max_distance=max_distance).double()
    structure = dependency_structure([N, 6], generator, forests=True)
    index = module.bucket_index(structure, B, torch.device("cpu"))
    assert index.dtype == (torch.uint8 if max_distance == 3 else torch.int32)
    q, k, v = random_qkv(B, H, N, D, generator)
    assert_matches_oracle(module, q, k, v, structure, generator)


def test_table_gradient_counts_every_head(generator):
    """A shared table's gradient sums dS over all heads: scaling dO of one head alone changes it (a sum that
    kept only the first head of a group would not see head 2)."""
    module = make(H, D).double()
    structure = dependency_structure([N, 6], generator, forests=True)
    q, k, v = random_qkv(B, H, N, D, generator)
    out = module(q, k, v, structure)
    grad_out = torch.randn(out.shape, generator=generator, dtype=out.dtype)
    (base,) = torch.autograd.grad(out, [module.table], grad_out, retain_graph=True)
    grad_out[:, 2] *= 3.0
    (scaled,) = torch.autograd.grad(out, [module.table], grad_out)
    want, _ = soft_bias_reference(module, q, k, v, structure.distance, structure.token_mask)
    (ref,) = torch.autograd.grad(want, [module.table], grad_out)
    torch.testing.assert_close(scaled, ref, **TOL)
    assert not torch.allclose(base, scaled)
