"""``fixed_decay``: the reference on long distances, no parameters, alpha = 0 is ``full``, fast == naive."""

from __future__ import annotations

import pytest
import torch

from structattn.attention import get_attention
from structattn.structures import Document, Sentence, get_provider
from tests.attention.cases import dependency_structure, random_qkv, random_sentence
from tests.attention.conftest import B, D, H
from tests.reference.fixed_decay import fixed_decay_reference

TOL = {"atol": 1e-9, "rtol": 1e-7}


def test_has_no_parameters_and_alpha_is_a_buffer():
    module = get_attention("fixed_decay", num_heads=H, head_dim=D, alpha=0.5)
    assert list(module.parameters()) == []
    assert "alpha" in dict(module.named_buffers()) and "alpha" in module.state_dict()
    assert module.penalty_table().tolist() == [-0.5 * x for x in range(12)]  # last: unreachable, alpha * 11


def test_matches_reference_beyond_max_distance_and_unreachable(generator):
    chain = Sentence(words=[f"w{i}" for i in range(6)], heads=[i - 1 for i in range(6)], id="chain")
    doc = Document(sentences=[chain, random_sentence(4, generator, "b")], id="doc")
    structure = get_provider("dependency").batch([doc, random_sentence(8, generator, "c")])
    assert int(structure.distance.max()) == 5 and bool((structure.distance[0, :6, 6:] == -1).all())
    module = get_attention("fixed_decay", num_heads=H, head_dim=D, alpha=0.8, max_distance=3).double()
    q, k, v = random_qkv(B, H, 10, D, generator)
    _, weights = module(q, k, v, structure, return_weights=True)
    alpha = float(module.alpha)
    want, want_weights = fixed_decay_reference(alpha, 3, q, k, v, structure.distance, structure.token_mask)
    torch.testing.assert_close(module(q, k, v, structure), want, **TOL)
    torch.testing.assert_close(weights, want_weights, **TOL)
    grads = torch.autograd.grad(module(q, k, v, structure).sum(), [q, k, v])
    for got, ref in zip(grads, torch.autograd.grad(want.sum(), [q, k, v])):
        torch.testing.assert_close(got, ref, **TOL)


def test_zero_alpha_equals_full(generator):
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator)
    decay = get_attention("fixed_decay", num_heads=H, head_dim=D, alpha=0.0)
    full = get_attention("full", num_heads=H, head_dim=D)
    torch.testing.assert_close(decay(q, k, v, structure), full(q, k, v, structure), **TOL)


def test_sdpa_equals_naive_backend(generator):
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator)
    fast = get_attention("fixed_decay", num_heads=H, head_dim=D, alpha=1.3, max_distance=2)
    slow = get_attention("fixed_decay", num_heads=H, head_dim=D, alpha=1.3, max_distance=2, backend="naive")
    torch.testing.assert_close(fast(q, k, v, structure), slow(q, k, v, structure), **TOL)


def test_bfloat16_against_float64(generator):
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator, torch.bfloat16)
    module = get_attention("fixed_decay", num_heads=H, head_dim=D, alpha=0.6)
    out = module(q, k, v, structure)
    assert out.dtype == torch.bfloat16
    wide = [x.detach().double() for x in (q, k, v)]
    want, _ = fixed_decay_reference(0.6, 10, *wide, structure.distance, structure.token_mask)
    torch.testing.assert_close(out.double(), want, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("options", [{"alpha": -1.0}, {"max_distance": 0}, {"backend": "cuda"}])
def test_bad_options_rejected(options):
    with pytest.raises(ValueError, match="fixed_decay"):
        get_attention("fixed_decay", num_heads=H, head_dim=D, **options)
