"""``BucketBiasSDPA``'s backward for short sentences, several sentences per op (``_backward_group``), against the
per-sentence tasks it replaces (the same products where each sentence is one task block: equal to rounding,
the same bits on some CPUs), and one sentence per op where the tasks would split it into row blocks, against
the float64 oracle: shared and per-head tables, padding, uint8 and int32 codes, groups that do not divide the batch, q/k/v that are
views of one fused projection (as in the encoder)."""

from __future__ import annotations

import pytest
import torch

from structattn.attention import bucket_bias as bb
from tests.attention.cases import dependency_structure, random_qkv
from tests.attention.cases.soft_bias import assert_matches_oracle, make

H, N, D = 3, 11, 4
LENGTHS = [N, 7, N, 4, 9]  # b = 5: groups of 2 leave one sentence alone


def _grads(module, lengths, dtype, *, grouped: bool, group: int, monkeypatch):
    """Output and gradients (q/k/v as views of one fused tensor, table, scale) with the group path forced on
    (``group`` sentences per op) or off (per-sentence tasks); asserts which path ran."""
    calls = []
    real = bb._backward_group
    monkeypatch.setattr(bb, "_sentence_group", lambda h, n, d: group if grouped else 0)
    monkeypatch.setattr(bb, "_backward_group", lambda *a: calls.append(a[1] - a[0]) or real(*a))
    structure = dependency_structure(lengths, torch.Generator().manual_seed(5), forests=True)
    fused = torch.randn(len(lengths), N, 3, H, D, generator=torch.Generator().manual_seed(6), dtype=dtype,
                        requires_grad=True)
    q, k, v = fused.permute(2, 0, 3, 1, 4)  # (b, h, n, d) each, not contiguous
    out = module(q, k, v, structure)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=dtype)
    got = torch.autograd.grad(out, [fused, module.table, module.scale], grad_out)
    want_calls = [min(group, len(lengths) - g0) for g0 in range(0, len(lengths), group)] if grouped else []
    assert calls == want_calls
    return (out, *got)


@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("max_distance", [3, 300])  # 300: more than 255 codes, stored as int32
def test_groups_match_the_per_sentence_tasks_to_rounding(per_head, dtype, max_distance, monkeypatch):
    """The same products, batched: the outputs are the same bits and the gradients agree to a few units in the
    last place of the largest entry (MKL's batched products round differently with the batch on some CPUs: the
    same bits on the machine this was written on, up to 1e-6 relative in float32 on a 2-core AMD EPYC)."""
    module = make(H, D, per_head=per_head, max_distance=max_distance).to(dtype)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one head range per sentence: the group path's condition
    try:
        grouped = _grads(module, LENGTHS, dtype, grouped=True, group=2, monkeypatch=monkeypatch)
        tasks = _grads(module, LENGTHS, dtype, grouped=False, group=2, monkeypatch=monkeypatch)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(grouped[0], tasks[0])  # the forward is shared
    ulp = torch.finfo(dtype).eps
    for a, b in zip(grouped[1:], tasks[1:]):
        torch.testing.assert_close(a, b, rtol=0.0, atol=16 * ulp * float(b.abs().max()))


def test_groups_match_the_oracle(generator, monkeypatch):
    module = make(H, D, per_head=False).double()
    monkeypatch.setattr(bb, "_sentence_group", lambda h, n, d: 3)
    structure = dependency_structure(LENGTHS, generator, forests=True)
    q, k, v = random_qkv(len(LENGTHS), H, N, D, generator)
    assert_matches_oracle(module, q, k, v, structure, generator)


def test_one_sentence_in_one_block_matches_the_oracle(generator, monkeypatch):
    """A sentence whose scores fit in half a block but that the per-sentence task would split into row blocks
    (here 8 + 3 rows) runs as one block of its own, and still matches the oracle."""
    monkeypatch.setattr(bb, "BLOCK_ELEMENTS", 800)  # block max(200, 2 h n d = 264) -> 264 < h n n = 363 <= 400
    assert bb._block_shape(H, N, D)[2] == 8 and bb._sentence_group(H, N, D) == 1
    sizes = []
    real = bb._backward_group
    monkeypatch.setattr(bb, "_backward_group", lambda *a: sizes.append(a[1] - a[0]) or real(*a))
    for per_head in (False, True):
        module = make(H, D, per_head=per_head).double()
        structure = dependency_structure(LENGTHS, generator, forests=True)
        q, k, v = random_qkv(len(LENGTHS), H, N, D, generator)
        assert_matches_oracle(module, q, k, v, structure, generator)
    assert sizes == [1] * (2 * len(LENGTHS))


def test_group_size_is_whole_sentences_per_block():
    """Benchmark shapes (h 8, d 64): two 128-token sentences per group (the same products as the per-sentence
    tasks); 256 tokens: one sentence, one block; from n = 257 the per-sentence tasks' row blocks."""
    assert bb._sentence_group(8, 128, 64) == 2
    assert bb._sentence_group(8, 64, 64) == 8
    assert bb._sentence_group(8, 256, 64) == 1
    assert bb._sentence_group(8, 257, 64) == 0
    span, heads, rows = bb._block_shape(8, 128, 64)
    assert (span, heads, rows) == (128, 8, 128)  # what the group path assumes of each sentence when it groups
