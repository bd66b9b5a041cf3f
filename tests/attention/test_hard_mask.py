"""``hard_mask``: radius covering everything is ``full``, radius 0 copies v, masked-head subsets, empty rows."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from structattn.attention import get_attention
from tests.attention.cases import dependency_structure, random_qkv
from tests.attention.conftest import B, D, H
from tests.reference.hard_mask import hard_mask_reference

TOL = {"atol": 1e-9, "rtol": 1e-7}


def test_radius_covering_everything_equals_full(generator):
    structure = dependency_structure([7, 5], generator)  # single trees: every real pair is reachable
    q, k, v = random_qkv(B, H, 7, D, generator)
    hard = get_attention("hard_mask", num_heads=H, head_dim=D, radius=7)
    full = get_attention("full", num_heads=H, head_dim=D)
    torch.testing.assert_close(hard(q, k, v, structure), full(q, k, v, structure), **TOL)
    _, w_hard = hard(q, k, v, structure, return_weights=True)
    _, w_full = full(q, k, v, structure, return_weights=True)
    torch.testing.assert_close(w_hard, w_full, **TOL)


def test_radius_zero_copies_values(generator):
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator)
    out = get_attention("hard_mask", num_heads=H, head_dim=D, radius=0)(q, k, v, structure)
    real = structure.token_mask[:, None, :, None]
    torch.testing.assert_close(out, torch.where(real, v, 0.0), **TOL)


def test_masked_head_subset(generator):
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator)
    module = get_attention("hard_mask", num_heads=H, head_dim=D, radius=2, masked_heads=[1])
    out = module(q, k, v, structure)
    full = get_attention("full", num_heads=H, head_dim=D)(q, k, v, structure)
    torch.testing.assert_close(out[:, [0, 2]], full[:, [0, 2]], **TOL)
    want, _ = hard_mask_reference(2, [1], q, k, v, structure.distance, structure.token_mask)
    torch.testing.assert_close(out, want, **TOL)
    assert not torch.allclose(out[:, 1], full[:, 1]), "the masked head must differ from full attention"


def test_row_without_allowed_key_is_zero(generator):
    """A real token whose distances are all -1 (even to itself) has no allowed key: zero output, zero weights."""
    structure = dependency_structure([7, 5], generator)
    distance = structure.distance.clone()
    distance[0, 3, :] = -1
    q, k, v = random_qkv(B, H, 7, D, generator)
    module = get_attention("hard_mask", num_heads=H, head_dim=D, masked_heads=[0, 1])
    out, weights = module(q, k, v, replace(structure, distance=distance), return_weights=True)
    fast = module(q, k, v, replace(structure, distance=distance))
    assert torch.all(out[0, :2, 3] == 0) and torch.all(weights[0, :2, 3] == 0) and torch.all(fast[0, :2, 3] == 0)
    assert torch.all(out[0, 2, 3] != 0), "head 2 is not masked and attends freely"
    grads = torch.autograd.grad(fast.sum(), [q, k, v])
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("options", [{"radius": -1}, {"masked_heads": [3]}, {"masked_heads": [0, 0]}])
def test_bad_options_rejected(options):
    with pytest.raises(ValueError, match="hard_mask"):
        get_attention("hard_mask", num_heads=H, head_dim=D, **options)
