"""Padded positions never influence real ones, whatever they hold (NaN, +-inf, 1e30), in every variant.

The base class replaces padded rows of q, k, v and ``hidden`` with zeros (``torch.where``: ``0 * NaN`` is
NaN) before the variant runs unless they are finite and small (``blank_inputs``: left in place on CPU), and zeroes padded query outputs once afterwards. Compared against the same
module on the clean inputs (padding zero), outputs and gradients w.r.t. the real inputs.
"""

from __future__ import annotations

import math

import pytest
import torch

from structattn.attention import attention_names
from structattn.attention.base import HARMLESS_PADDING, blank_inputs
from tests.attention.cases import fill_padding, load_case, random_qkv
from tests.attention.conftest import LENGTHS, B, D, H

GARBAGE = [math.nan, math.inf, -math.inf, 1e30]
TARGETS = ["q", "k", "v", "hidden", "all"]


def inputs(case, generator):
    structure = case.make_structure(LENGTHS, generator)
    n = structure.num_tokens
    q, k, v = random_qkv(B, H, n, D, generator)
    hidden = torch.randn(B, n, H * D, generator=generator, dtype=torch.float64).requires_grad_()
    return structure, {"q": q, "k": k, "v": v, "hidden": hidden}


def run(module, structure, tensors, probe):
    """Output and gradients (w.r.t. q, k, v, hidden) of ``(out * probe).sum()``; ``hidden`` is passed to every
    variant (the ones that do not read it ignore it)."""
    leaves = {name: x.detach().requires_grad_() for name, x in tensors.items()}
    out = module(leaves["q"], leaves["k"], leaves["v"], structure, hidden=leaves["hidden"])
    grads = torch.autograd.grad((out * probe).sum(), list(leaves.values()), allow_unused=True)
    return out, {name: (torch.zeros_like(x) if g is None else g) for (name, x), g in zip(leaves.items(), grads)}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("garbage", GARBAGE, ids=["nan", "inf", "-inf", "1e30"])
@pytest.mark.parametrize("name", attention_names())
def test_padding_garbage_never_reaches_real_tokens(name, garbage, target, generator):
    case = load_case(name)
    module = case.make(H, D).double().eval()
    structure, clean = inputs(case, generator)
    mask = structure.token_mask
    assert not bool(mask.all()), "the batch must contain padding"
    clean = {x: fill_padding(t.detach(), mask, 0.0, DIMS[x]) for x, t in clean.items()}
    dirty = {x: (fill_padding(t, mask, garbage, DIMS[x]) if target in (x, "all") else t) for x, t in clean.items()}
    assert_same_on_real_tokens(module, structure, clean, dirty, generator)


DIMS = {"q": 2, "k": 2, "v": 2, "hidden": 1}  # the token dim of each input


def assert_same_on_real_tokens(module, structure, clean, dirty, generator) -> None:
    """The dirty-padded run equals the clean one on real tokens (outputs and gradients); padded query rows are
    zero and padded positions get a zero (finite) gradient."""
    mask = structure.token_mask
    probe = torch.randn(B, H, structure.num_tokens, D, generator=generator, dtype=torch.float64)
    want, want_grads = run(module, structure, clean, probe)
    got, got_grads = run(module, structure, dirty, probe)
    real = mask[:, None, :, None].expand_as(got)
    torch.testing.assert_close(got[real], want[real], atol=1e-12, rtol=1e-10)
    assert torch.all(got[~real] == 0), "padded query rows must be zero"
    for x, g in got_grads.items():
        assert torch.isfinite(g).all(), f"gradient w.r.t. {x} is not finite"
        keep = mask.view(B, *([1] * (DIMS[x] - 1)), -1, *([1] * (g.dim() - DIMS[x] - 1))).expand_as(g)
        torch.testing.assert_close(g[keep], want_grads[x][keep], atol=1e-12, rtol=1e-10)
        assert torch.all(g[~keep] == 0), f"padded positions of {x} must get no gradient"


def scatter_padding(x: torch.Tensor, token_mask: torch.Tensor, token_dim: int, scale: float, generator) -> torch.Tensor:
    """``x`` with random values of size ``scale`` at the padded positions (finite garbage)."""
    shape = [1] * x.dim()
    shape[0], shape[token_dim] = token_mask.shape
    noise = scale * torch.randn(x.shape, generator=generator, dtype=x.dtype)
    return torch.where(token_mask.view(shape), x, noise)


@pytest.mark.parametrize("name", attention_names())
def test_harmless_padding_is_left_in_place_and_never_leaks(name, generator):
    """Finite padded entries up to ``HARMLESS_PADDING`` are not copied away (``blank_inputs``), and they still
    never reach real tokens: outputs and gradients equal the zero-padded run's, padded gradients are zero."""
    case = load_case(name)
    module = case.make(H, D).double().eval()
    structure, clean = inputs(case, generator)
    mask = structure.token_mask
    clean = {x: fill_padding(t.detach(), mask, 0.0, DIMS[x]) for x, t in clean.items()}
    dirty = {x: scatter_padding(t, mask, DIMS[x], 1e5, generator) for x, t in clean.items()}
    for x, t in dirty.items():
        assert blank_inputs(t, mask, DIMS[x]) is t, f"harmless padding of {x} was copied"
    assert_same_on_real_tokens(module, structure, clean, dirty, generator)


@pytest.mark.parametrize("value", [math.nan, math.inf, 2 * HARMLESS_PADDING])
def test_blank_inputs_replaces_what_could_matter(value):
    mask = torch.tensor([[True, True, False]])
    x = torch.ones(1, 2, 3, 4)
    x[:, :, 2] = value
    out = blank_inputs(x, mask, 2)
    assert out is not x and torch.equal(out[:, :, 2], torch.zeros(1, 2, 4)) and torch.equal(out[:, :, :2], x[:, :, :2])
    harmless = torch.ones(1, 2, 3, 4)
    assert blank_inputs(harmless, mask, 2) is harmless
    half = harmless.half()
    assert blank_inputs(half, mask, 2) is not half  # half inputs always blank (their range is small)
