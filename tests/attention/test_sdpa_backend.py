"""masking.sdpa: F.scaled_dot_product_attention with the math kernel for half CPU inputs that need gradients;
outputs and gradients match a float64 reference written from the definition, in every dtype it routes."""

import pytest
import torch

from structattn.attention.masking import sdpa


def reference(q, k, v, allowed):
    scores = q.double() @ k.double().transpose(-1, -2) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1) @ v.double()


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("kind", ["none", "mask", "causal"])
def test_sdpa_matches_the_float64_definition(dtype, tolerance, kind):
    torch.manual_seed(0)
    b, h, n, d = 2, 3, 7, 5
    q, k, v = (torch.randn(b, h, n, d, dtype=torch.float64) for _ in range(3))
    allowed = torch.ones(b, 1, n, n, dtype=torch.bool)
    kwargs = {}
    if kind == "mask":
        keys = torch.tensor([[True] * n, [True] * 4 + [False] * (n - 4)])
        allowed = allowed & keys[:, None, None, :]
        kwargs["attn_mask"] = keys[:, None, None, :]
    elif kind == "causal":
        allowed = allowed & torch.ones(n, n, dtype=torch.bool).tril()
        kwargs["is_causal"] = True
    leaves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    out = sdpa(*leaves, **kwargs)
    expected = reference(*ref_leaves, allowed)
    assert out.dtype == dtype
    scale = expected.abs().max().item()
    assert (out.double() - expected).abs().max().item() <= tolerance * scale
    grad = torch.randn_like(expected)
    out.backward(grad.to(dtype))
    expected.backward(grad)
    for got, want in zip(leaves, ref_leaves):
        assert (got.grad.double() - want.grad).abs().max().item() <= tolerance * want.grad.abs().max().item()
