"""``full``: no structure == all-real structure == plain SDPA; fast path == weights path."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from structattn.attention import get_attention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure, random_qkv
from tests.attention.conftest import B, D, H
from tests.reference.full import full_reference

TOL = {"atol": 1e-9, "rtol": 1e-7}


def test_without_structure_is_plain_sdpa(generator):
    q, k, v = random_qkv(B, H, 7, D, generator)
    module = get_attention("full", num_heads=H, head_dim=D)
    out = module(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL)
    all_real = Structure(token_mask=torch.ones(B, 7, dtype=torch.bool))
    torch.testing.assert_close(module(q, k, v, all_real), out, **TOL)
    want, want_weights = full_reference(q, k, v, all_real.token_mask)
    out_w, weights = module(q, k, v, return_weights=True)
    torch.testing.assert_close(out_w, want, **TOL)
    torch.testing.assert_close(weights, want_weights, **TOL)


def test_fast_path_equals_weights_path_with_padding(generator):
    structure = dependency_structure([7, 4], generator)
    q, k, v = random_qkv(B, H, 7, D, generator)
    module = get_attention("full", num_heads=H, head_dim=D)
    fast = module(q, k, v, structure)
    slow, _ = module(q, k, v, structure, return_weights=True)
    torch.testing.assert_close(fast, slow, **TOL)
    for got, ref in zip(torch.autograd.grad(fast.sum(), [q, k, v]), torch.autograd.grad(slow.sum(), [q, k, v])):
        torch.testing.assert_close(got, ref, **TOL)


def test_float16_inputs(generator):
    structure = dependency_structure([7, 5], generator)
    q, k, v = random_qkv(B, H, 7, D, generator, torch.float16)
    out = get_attention("full", num_heads=H, head_dim=D)(q, k, v, structure)
    assert out.dtype == torch.float16
    want, _ = full_reference(q.detach(), k.detach(), v.detach(), structure.token_mask)
    torch.testing.assert_close(out.double(), want, atol=1e-2, rtol=1e-2)
