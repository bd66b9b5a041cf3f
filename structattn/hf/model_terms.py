"""Variants on layers where the model adds its own score terms, which are kept.

Some families add something of their own to every score of a layer: T5 its relative position bias, DeBERTa-v2
its disentangled content-to-position and position-to-content scores, ModernBERT's local layers a sliding
window. An attached layer keeps them and adds the variant's own terms:

    weights = softmax_j(q_i . k_j / sqrt(d) + model_bias_ij + variant_bias_ij)  over j with
              real(j) and model_allowed_ij and variant_allowed_ij

so the variant's ``allowed`` keys are intersected with the model's window, and its bias is added to the
model's. That needs a variant whose effect is a bias and/or a key restriction: ``full`` and every
:class:`~structattn.attention.biased.BiasedAttention` (``soft_bias``, ``hard_mask``, ``fixed_decay``, and
plugins built on it), through their public ``bias`` and ``allowed`` hooks. Other variants (``ssan``,
``local_global``) are refused on such layers at attach time.

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

import torch

from structattn.attention.base import StructuredAttention, blank_inputs, blank_padding, key_padding
from structattn.attention.biased import BiasedAttention
from structattn.attention.full import FullAttention
from structattn.attention.masking import compute_dtype, naive_attention, sdpa_allowed, sdpa_bias
from structattn.structures.structure import Structure


def accepts_model_terms(variant: StructuredAttention) -> bool:
    """Whether ``variant`` can run beside a model's own bias and window (``full`` or a ``BiasedAttention``)."""
    return isinstance(variant, (BiasedAttention, FullAttention))


def attend_with_model_terms(
    variant: StructuredAttention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    structure: Structure,
    model_bias: torch.Tensor | None,
    model_allowed: torch.Tensor | None,
    return_weights: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The equation of the module docstring for one head group.

    Padded keys get no weight; padded query rows output zeros (as ``StructuredAttention.forward``). The fused
    path is ``sdpa_bias`` / ``sdpa_allowed``; the eager one (weights requested, or the variant's ``naive``
    backend) is ``naive_attention`` (float32 softmax).

    Args:
        variant: ``full`` or a ``BiasedAttention`` built for this group's heads.
        q, k, v: the group's heads, already scaled so that ``q . k / sqrt(d)`` is the model's content score.
        structure: the group's batched structure (its ``token_mask`` is the key padding).
        model_bias: the model's own additive scores, float ``(b or 1, h or 1, n, n)``, or ``None``.
        model_allowed: the model's own key restriction (e.g. a sliding window), bool broadcastable to
            ``(b, h, n, n)``, or ``None``.
        return_weights: also return the weights.

    Shapes:
        q, k, v ``(b, h, n, d)`` -> out ``(b, h, n, d)``, weights ``(b, h, n, n)`` or ``None``.

    Raises:
        ValueError: a variant that is neither ``full`` nor a ``BiasedAttention``, or a structure lacking the
            variant's fields.
    """
    if not accepts_model_terms(variant):
        raise ValueError(f"attention {variant.name!r} cannot add its terms to the model's own scores")
    structure.require(variant.requires, f"attention {variant.name!r}")
    b, h, n, _ = q.shape
    token_mask = key_padding(structure, b, n, q.device)  # (b, n)
    q, k, v = (blank_inputs(x, token_mask, 2) for x in (q, k, v))
    cd = compute_dtype(q.dtype)
    bias = None if model_bias is None else model_bias.to(cd)
    allowed = token_mask[:, None, None, :]  # (b, 1, 1, n)
    if isinstance(variant, BiasedAttention):
        own = variant.bias(structure, b, h, q.device, cd)
        bias = own if bias is None else (bias if own is None else bias + own)
        own_allowed = variant.allowed(structure, b, q.device)
        allowed = allowed if own_allowed is None else allowed & own_allowed
    if model_allowed is not None:
        allowed = allowed & model_allowed.to(q.device)
    if return_weights or getattr(variant, "backend", "sdpa") == "naive":
        out, weights = naive_attention(q, k, v, bias=bias, allowed=allowed)
    else:
        weights = None
        out = sdpa_allowed(q, k, v, allowed) if bias is None else sdpa_bias(q, k, v, bias, allowed)
    out = blank_padding(out, token_mask, 2)
    return out, (None if weights is None or not return_weights else blank_padding(weights, token_mask, 2))
