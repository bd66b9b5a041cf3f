"""Numerics at the edges: half-precision inputs with large values, SSAN's policy gradient with huge scores."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from structattn.attention import attention_names, get_attention
from structattn.structures import Sentence, get_provider
from tests.attention.cases import dependency_structure, load_case
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


def _inputs(name: str, generator: torch.Generator):
    case = load_case(name)
    structure = case.make_structure([7, 5], generator)
    q, k, v = (torch.randn(2, 3, structure.num_tokens, 5, generator=generator) for _ in range(3))
    hidden = torch.randn(2, structure.num_tokens, 15, generator=generator)
    return case.make(3, 5), structure, q, k, v, hidden


@pytest.mark.parametrize("name", attention_names())
@pytest.mark.parametrize(
    "change,message",
    [
        ({"q": torch.int64}, r"q int64, k float32, v float32"),
        ({"k": torch.float64}, r"q float32, k float64, v float32"),
        ({"q": torch.float16, "k": torch.float16, "v": torch.float16, "hidden": torch.int32}, r"hidden .*int32"),
    ],
    ids=["int-q", "mixed-float", "int-hidden"],
)
def test_bad_dtypes_are_named(name, change, message, generator):
    module, structure, q, k, v, hidden = _inputs(name, generator)
    tensors = {"q": q, "k": k, "v": v, "hidden": hidden}
    tensors = {x: (t.to(change[x]) if x in change else t) for x, t in tensors.items()}
    with pytest.raises(ValueError, match=rf"{name}.*{message}"):
        module(tensors["q"], tensors["k"], tensors["v"], structure, hidden=tensors["hidden"])


@pytest.mark.parametrize("name", ["soft_bias", "fixed_decay", "hard_mask"])
def test_float_distance_is_rejected(name, generator):
    module, structure, q, k, v, hidden = _inputs(name, generator)
    bad = replace(structure, distance=structure.distance.float())
    with pytest.raises(ValueError, match=rf"{name}.*distance must be an integer tensor.*float32"):
        module(q, k, v, bad)


@pytest.mark.parametrize("name", attention_names())
def test_three_dimensional_inputs_are_named(name, generator):
    module, structure, q, k, v, hidden = _inputs(name, generator)
    with pytest.raises(ValueError, match=rf"{name}.*\(b, h, n, d\).*q \(2, 7, 5\)"):
        module(q[:, 0], k[:, 0], v[:, 0], structure, hidden=hidden)
    with pytest.raises(ValueError, match=rf"{name}.*q \(2, 7, 5\)"):
        module(q[:, 0], k, v, structure, hidden=hidden)
    with pytest.raises(ValueError, match=rf"{name}.*hidden"):
        module(q, k, v, structure, hidden=hidden[..., 0])


@pytest.mark.parametrize("name", attention_names())
def test_value_head_size_other_than_the_query_s(name, generator):
    """soft_bias / fixed_decay used to fail inside SDPA's flash kernel ("Q/K/V should have the same head size"),
    local_global with a tensor-size mismatch: the base class now names the variant and the shapes; a variant
    whose every path takes another value size (``value_size_may_differ``) returns ``(b, h, n, e)``."""
    module, structure, q, k, v, hidden = _inputs(name, generator)
    wide = torch.randn(*v.shape[:-1], 8, generator=generator)  # e = 8, d = 5
    for weights in (False, True):
        if type(module).value_size_may_differ:
            out = module(q, k, wide, structure, hidden=hidden, return_weights=weights)
            assert (out[0] if weights else out).shape == (2, 3, structure.num_tokens, 8)
            continue
        with pytest.raises(ValueError, match=rf"^attention '{name}': v has head size 8, q and k have 5 "
                                             rf"\(q \(2, 3, 7, 5\), v \(2, 3, 7, 8\)\); this variant needs one head size"):
            module(q, k, wide, structure, hidden=hidden, return_weights=weights)


def test_ssan_with_a_structure_bias_takes_another_value_size(generator):
    module = get_attention("ssan", num_heads=3, head_dim=5, structure_bias="soft_bias", generator=1).eval()
    structure = dependency_structure([7, 5], generator)
    q, k = (torch.randn(2, 3, 7, 5, generator=generator) for _ in range(2))
    v = torch.randn(2, 3, 7, 8, generator=generator)
    hidden = torch.randn(2, 7, 15, generator=generator)
    out, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    assert out.shape == (2, 3, 7, 8) and torch.allclose(out, weights @ v, atol=1e-5)
