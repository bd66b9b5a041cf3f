"""Masking and the eager / fused dense paths shared by the attention variants.

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim. Layout ``b h n d``.

- :func:`mask_value` / :func:`compute_dtype`: the finite minimum for disallowed scores; float32 for halves.
- :func:`masked_softmax` / :func:`naive_attention`: the eager path (float32 softmax, finite minimum for
  disallowed keys, max subtraction, rows with no allowed key give an all-zero row), used when weights are
  requested and as ``backend="naive"``.
- :func:`sdpa_allowed` / :func:`sdpa_bias`: ``scaled_dot_product_attention`` with a boolean mask (and a float
  bias); rows with no allowed key yield zeros (never NaN, whatever the kernel does with an empty row).
- :func:`sdpa`: ``scaled_dot_product_attention`` as every fused call here makes it, with the backend picked for
  speed: on CPU, half-precision inputs with gradients use the math kernel (torch 2.13's CPU flash kernel in
  bfloat16 is 4-8x slower than the math one at translation sizes, forward + backward; measured by
  ``benchmarks/profile_step.py``), everything else torch's own choice.

Padded query rows are zeroed once, by ``StructuredAttention.forward``, not here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HALF_TYPES = (torch.float16, torch.bfloat16)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, attn_mask: torch.Tensor | None = None,
         is_causal: bool = False, dropout_p: float = 0.0) -> torch.Tensor:
    """``F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)`` with the fastest CPU kernel.

    The result is the same computation whichever kernel runs (to the dtype's rounding); only the backend choice
    differs: half-precision CPU inputs that need a backward pass go to ``SDPBackend.MATH``, since the CPU flash
    kernel's bfloat16 backward dominates a training step otherwise (106 of 783 ms a step of the Multi30k-size
    model, Xeon with AMX, 1 thread).

    Shapes:
        q ``(b, h, i, d)``; k, v ``(b, h, j, d)``; attn_mask bool (True: allowed) or float, broadcastable to
        ``(b, h, i, j)``.
    """
    if q.device.type == "cpu" and q.dtype in HALF_TYPES and torch.is_grad_enabled() and q.requires_grad:
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                                  is_causal=is_causal)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)


def mask_value(dtype: torch.dtype) -> float:
    """The finite minimum used for disallowed scores (``-finfo(float32).max``; the dtype's own for halves)."""
    return -torch.finfo(dtype if dtype in HALF_TYPES else torch.float32).max


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmax dtype: float32 for float16/bfloat16 inputs, else the input dtype (float32 / float64)."""
    return torch.float32 if dtype in HALF_TYPES else dtype

def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Softmax over keys in float32 (float64 stays float64) where ``allowed``; an empty row gives zeros.

    Shapes:
        scores ``(b, h, n, n)``; allowed bool, broadcastable to it (``None``: everything allowed).
    """
    scores = scores.to(compute_dtype(scores.dtype))
    if allowed is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~allowed, mask_value(scores.dtype))
    top = scores.amax(dim=-1, keepdim=True).detach()
    expo = torch.exp(scores - top).masked_fill(~allowed, 0.0)
    total = expo.sum(dim=-1, keepdim=True)
    return expo / total.clamp_min(torch.finfo(total.dtype).tiny)


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d) + bias) v`` over allowed keys (Vaswani et al. 2017, eq. 1), eagerly.

    Shapes:
        q, k, v ``(b, h, n, d)``; bias float broadcastable to ``(b, h, n, n)``; allowed bool, same.
        Returns out ``(b, h, n, d)`` and weights ``(b, h, n, n)``, both in the input dtype.
    """
    cd = compute_dtype(q.dtype)
    scores = torch.einsum("bhid,bhjd->bhij", q.to(cd), k.to(cd)) * q.shape[-1] ** -0.5
    if bias is not None:
        scores = scores + bias.to(cd)
    weights = masked_softmax(scores, allowed)
    out = torch.einsum("bhij,bhjd->bhid", weights, v.to(cd))
    return out.to(q.dtype), weights.to(q.dtype)


def sdpa_allowed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Fused SDPA restricted to ``allowed`` keys; a row with no allowed key outputs zeros, never NaN, whatever
    the kernel does with an empty row. (Padded query rows are zeroed by ``StructuredAttention.forward``.)

    Shapes:
        q, k, v ``(b, h, n, d)``; allowed bool broadcastable to ``(b, h, n, n)`` (e.g. ``(b, 1, 1, n)``).
    """
    keep = allowed.any(dim=-1, keepdim=True)  # (b, 1|h, 1|n, 1)
    out = sdpa(q, k, v, attn_mask=allowed | ~keep)
    if q.device.type == "cpu" and bool(keep.all()):
        return out
    return torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))


def sdpa_bias(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, allowed: torch.Tensor
) -> torch.Tensor:
    """Fused SDPA with an additive float ``bias`` over the ``allowed`` keys (a finite minimum elsewhere); a row
    with no allowed key outputs zeros. Half inputs on CPU are computed in float32. Differentiable in ``bias``.

    Shapes:
        q, k, v ``(b, h, n, d)``; bias float ``(b, 1|h, n, n)``; allowed bool broadcastable to ``(b, h, n, n)``.
    """
    dtype = q.dtype
    cd = compute_dtype(dtype) if q.device.type == "cpu" else dtype
    mask = torch.where(allowed, bias.to(cd), mask_value(cd))
    keep = allowed.any(dim=-1, keepdim=True)
    out = sdpa(q.to(cd), k.to(cd), v.to(cd), attn_mask=mask).to(dtype)
    if q.device.type == "cpu" and bool(keep.all()):
        return out
    return torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))
