"""Numerics at the edges: half-precision inputs with large values, SSAN's policy gradient with huge scores."""

from __future__ import annotations

import pytest
import torch

from structattn.attention import get_attention
from structattn.structures import Sentence, get_provider
from tests.attention.cases import dependency_structure
from tests.reference.local_global import local_global_reference


def window_batch(lengths: list[int], radius: int) -> object:
    sentences = [Sentence(words=["w"] * n, id=f"s{k}") for k, n in enumerate(lengths)]
    return get_provider("window", radius=radius, dilation=1, global_tokens=(0,)).batch(sentences)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("radius", [2, 20], ids=["banded", "window-covers-all"])
@pytest.mark.parametrize("return_weights", [False, True])
def test_local_global_half_inputs_with_large_values(dtype, radius, return_weights):
    """Regression: float16 local_global returned NaN for |q|, |k| >= 300 (scores overflowed float16); now the
    scores and softmax run in float32 for half inputs. Compared with the float64 oracle on the rounded inputs."""
    structure = window_batch([11, 8], radius)
    g = torch.Generator().manual_seed(3)
    q, k = ((300 + 30 * torch.rand(2, 3, 11, 5, generator=g)).to(dtype) for _ in range(2))
    v = torch.randn(2, 3, 11, 5, generator=g).to(dtype)
    module = get_attention("local_global", num_heads=3, head_dim=5)
    result = module(q, k, v, structure, return_weights=return_weights)
    out = result[0] if return_weights else result
    assert out.dtype == dtype and torch.isfinite(out).all()
    want, want_weights = local_global_reference(q, k, v, structure.token_mask, radius, 1, structure.is_global)
    torch.testing.assert_close(out.double(), want, atol=2e-2, rtol=2e-2)
    if return_weights:
        torch.testing.assert_close(result[1].double(), want_weights, atol=2e-2, rtol=2e-2)


def test_ssan_policy_gradient_stays_finite_for_huge_scores():
    """Regression: with |q|, |k| ~ 1e3 an unselected key scores far above the selected ones, and the
    straight-through policy gradient exp(s_j - lse_selected) reached ~1e36 (its square, used by Adam and
    gradient clipping, overflowed float32). It is now formed in log space with a capped exponent."""
    b, h, n, d = 2, 3, 7, 5
    module = get_attention("ssan", num_heads=h, head_dim=d, generator=4).train()
    g = torch.Generator().manual_seed(4)
    structure = dependency_structure([7, 5], g)
    q, k = (1e3 * torch.randn(b, h, n, d, generator=g) for _ in range(2))
    v = torch.randn(b, h, n, d, generator=g)
    hidden = torch.randn(b, n, h * d, generator=g).requires_grad_()
    out = module(q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), structure, hidden=hidden)
    (out * torch.randn(out.shape, generator=g)).sum().backward()
    for label, x in [*module.named_parameters(), ("hidden", hidden), ("q", q), ("k", k), ("v", v)]:
        assert torch.isfinite(x.grad).all(), f"gradient of {label} is not finite"
        assert torch.isfinite(x.grad.square().sum()), f"squared gradient of {label} overflows float32"
    assert module.policy_query.weight.grad.abs().sum() > 0
