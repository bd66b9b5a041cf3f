"""``ssan``'s blockwise kernels: many small blocks (block sizes patched down) against the float64 oracle and
against one whole block, with padding, a broadcast structure bias, soft selection and returned weights."""

from __future__ import annotations

import pytest
import torch

from structattn.attention import ssan_kernels
from structattn.attention.ssan_kernels import PolicySelectiveAttention, SelectiveAttention
from tests.attention.cases import dependency_structure, random_qkv
from tests.reference.ssan import ssan_reference
from tests.attention.test_ssan import bias_oracle, build

B, H, D, DM = 2, 3, 5, 11
LENGTHS = [13, 9]  # n = 13: blocks of 4 rows leave a ragged last block


@pytest.fixture(params=[2, 3], ids=["one-head", "one-batch-element"])
def small_blocks(monkeypatch, request):
    """Blocks of 4 query rows and 1 head (room for 2: 3 heads have no divisor 2) or 3 heads (a batch element)."""
    monkeypatch.setattr(ssan_kernels, "_BLOCK_ROWS", 4)
    monkeypatch.setattr(ssan_kernels, "_WHOLE_ROWS", 0)
    monkeypatch.setattr(ssan_kernels, "_BLOCK_ELEMENTS", request.param * 4 * 13)


def inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    structure = dependency_structure(LENGTHS, g)
    q, k, v = random_qkv(B, H, max(LENGTHS), D, g)
    hidden = torch.randn(B, max(LENGTHS), DM, generator=g, dtype=torch.float64).requires_grad_()
    return structure, q, k, v, hidden


def test_blocks_tile_heads_within_or_across_batch_elements(monkeypatch):
    monkeypatch.setattr(ssan_kernels, "_BLOCK_ROWS", 4)
    monkeypatch.setattr(ssan_kernels, "_WHOLE_ROWS", 0)
    for elements, heads in [(4 * 10, 1), (2 * 4 * 10, 1), (3 * 4 * 10, 3), (7 * 4 * 10, 6), (99 * 4 * 10, 6)]:
        monkeypatch.setattr(ssan_kernels, "_BLOCK_ELEMENTS", elements)
        blocks = list(ssan_kernels._blocks(2, 3, 10))
        assert {s.stop - s.start for s, _ in blocks} == {heads}
        covered = torch.zeros(6, 10, dtype=torch.int64)
        for s, r in blocks:
            covered[s, r] += 1
        assert torch.all(covered == 1)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_many_blocks_match_reference(small_blocks, training, soft, with_bias):
    options = {"structure_bias": "soft_bias", "structure_bias_options": {"max_distance": 3, "per_head": True}} if with_bias else {}
    module = build(soft=soft, **options).train(training)
    structure, q, k, v, hidden = inputs(1)
    if with_bias:
        with torch.no_grad():
            module.structure_bias.table.copy_(torch.randn(module.structure_bias.table.shape, dtype=torch.float64))
    out, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    bias_fn = (lambda: bias_oracle(module, structure)) if with_bias else None
    ref_out, ref_weights = ssan_reference(module, q, k, v, structure.token_mask, hidden, bias_fn)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)
    probe_out, probe_w = torch.randn_like(out), torch.randn_like(weights)
    leaves = [q, k, v, hidden, *module.parameters()]
    got = torch.autograd.grad((out * probe_out).sum() + (weights * probe_w).sum(), leaves)
    want = torch.autograd.grad((ref_out * probe_out).sum() + (ref_weights * probe_w).sum(), leaves)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def kernel_inputs(seed: int, n: int = 13):
    g = torch.Generator().manual_seed(seed)
    pq, pk, q, k, v = (torch.randn(B, H, n, D, generator=g, dtype=torch.float64) for _ in range(5))
    bias = torch.randn(1, H, n, n, generator=g, dtype=torch.float64)
    key_real = torch.ones(B, 1, 1, n, dtype=torch.bool)
    key_real[1, ..., 9:] = False
    return [t.requires_grad_() for t in (pq, pk, q, k, v, bias)], key_real, key_real.transpose(-1, -2)


@pytest.mark.parametrize("soft", [False, True])
def test_policy_kernel_equals_the_energy_kernel_and_one_block(monkeypatch, soft):
    """The fused policy kernel, block by block, against the energy kernel with autograd's pq pk^T, one block."""
    (pq, pk, q, k, v, bias), key_real, query_real = kernel_inputs(2)
    noise = torch.randn(B, H, 13, 13, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    probe = torch.randn(B, H, 13, D, dtype=torch.float64)
    leaves = [pq, pk, q, k, v, bias]
    energy = 0.7 * pq @ pk.transpose(-1, -2)  # the policy scale 1 / tau = 0.7
    out, w, count = SelectiveAttention.apply(energy, noise.clone(), None, q, k, v, bias, key_real, query_real, soft, 0.5)
    want = torch.autograd.grad((out * probe).sum(), leaves)
    monkeypatch.setattr(ssan_kernels, "_BLOCK_ROWS", 3)
    monkeypatch.setattr(ssan_kernels, "_WHOLE_ROWS", 0)
    monkeypatch.setattr(ssan_kernels, "_BLOCK_ELEMENTS", 3 * 13)
    z = noise + energy.detach()
    out2, count2, w2 = PolicySelectiveAttention.apply(z, pq, pk, 0.7, q, k, v, bias, key_real, query_real, soft, 0.5, True)
    got = torch.autograd.grad((out2 * probe).sum(), leaves)
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(w2, w)
    assert int(count2) == int(count) > 0
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    assert torch.all(w2[1, :, 9:] == 0) and torch.all(w2[1, ..., 9:] == 0), "padded queries and keys get no weight"


def test_no_weights_requested_returns_two_outputs_and_same_gradients(small_blocks):
    (pq, pk, q, k, v, bias), key_real, query_real = kernel_inputs(4)
    z = (pq @ pk.transpose(-1, -2)).detach()
    leaves = [pq, pk, q, k, v, bias]
    results = [PolicySelectiveAttention.apply(z, pq, pk, 1.0, q, k, v, bias, key_real, query_real, False, 0.4, want) for want in (False, True)]
    assert len(results[0]) == 2 and len(results[1]) == 3
    grads = [torch.autograd.grad(r[0].square().sum(), leaves) for r in results]
    for a, b_ in zip(*grads):
        torch.testing.assert_close(a, b_)
