"""DeBERTa-v2/v3: structattn variants inside ``DisentangledSelfAttention``, whose scores it computes itself.

DeBERTa-v2's self-attention (``transformers.models.deberta_v2.modeling_deberta_v2.DisentangledSelfAttention``)
does not call ``transformers.AttentionInterface``: its ``forward`` projects q, k, v, computes
``q k^T / sqrt(d * s)`` plus the disentangled relative-position scores (``disentangled_attention_bias``:
content-to-position ``c2p`` and position-to-content ``p2c``; ``s = 1 + [c2p] + [p2c]``), masks, softmaxes,
applies attention dropout and multiplies by v. :func:`patch` replaces exactly one thing, the **class** of
each attached layer's module, by :class:`StructuredDisentangledSelfAttention`, a subclass whose ``forward``
keeps the projections and calls the model's own ``disentangled_attention_bias`` unchanged, and replaces the
masked softmax and the product with v by the attached variants (:class:`~structattn.hf.attached.AttachedAttention`)
over the same scores:

    weights = softmax_j(q_i . k_j / sqrt(d * s) + c2p_ij + p2c_ij + variant_bias_ij)  over allowed real keys

(the variants compute ``q' . k / sqrt(d)`` with ``q' = q / sqrt(s)``). Parameters, their names and the state
dict are those of the original module plus ``structattn.*``; the class shows in ``repr(model)``; layers
planned as plain ``full`` keep the original class. Attention-probability dropout is not applied on attached
layers (as on every attached layer). DeBERTa's forward passes no keyword arguments to its layers, so the
``structures=`` keyword of the model's call is taken by a forward pre-hook on the attached model and read
by the layers from :func:`structattn.hf.interface.active_structures` (restored after the call, also on error).

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

from typing import Any

import torch
from einops import rearrange
from torch import nn

from structattn.hf import interface


def _base_class() -> type[nn.Module]:
    from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

    return DisentangledSelfAttention


def structured_class() -> type[nn.Module]:
    """:class:`StructuredDisentangledSelfAttention` (built on first use: it subclasses a transformers class)."""
    global StructuredDisentangledSelfAttention
    if StructuredDisentangledSelfAttention is None:
        StructuredDisentangledSelfAttention = type(
            "StructuredDisentangledSelfAttention", (_base_class(),),
            {"forward": _forward, "__doc__": _DOC, "__module__": __name__},
        )
    return StructuredDisentangledSelfAttention


StructuredDisentangledSelfAttention: type[nn.Module] | None = None  # see structured_class()

_DOC = """DeBERTa-v2's ``DisentangledSelfAttention`` whose masked softmax is the attached structattn variants
(see :mod:`structattn.hf.deberta`); it reads its variants from the submodule ``structattn``."""


def patch(module: nn.Module) -> None:
    """Give ``module`` (a ``DisentangledSelfAttention`` with a ``structattn`` submodule) the structured class.

    Raises:
        TypeError: ``module`` is not exactly DeBERTa-v2's ``DisentangledSelfAttention``.
    """
    if type(module) is not _base_class():
        raise TypeError(f"structattn.hf.deberta.patch expects DeBERTa-v2's DisentangledSelfAttention, got "
                        f"{type(module).__module__}.{type(module).__name__}")
    module.__class__ = structured_class()


def take_structures_from_calls(model: nn.Module) -> None:
    """Hooks on ``model``: a forward call's ``structures=`` keyword is removed before DeBERTa's forward (which
    would drop it) and made the active structures for the call's duration (:func:`interface.activate`)."""
    tokens: list[Any] = []

    def before(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        given = kwargs.pop("structures", None)
        tokens.append(None if given is None else interface.activate(given))
        return args, kwargs

    def after(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        token = tokens.pop() if tokens else None
        if token is not None:
            interface.deactivate(token)

    model.register_forward_pre_hook(before, with_kwargs=True)
    model.register_forward_hook(after, with_kwargs=True, always_call=True)


def _forward(
    self: nn.Module,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor,
    output_attentions: bool = False,
    query_states: torch.Tensor | None = None,
    relative_pos: torch.Tensor | None = None,
    rel_embeddings: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """DeBERTa-v2's forward with the masked softmax and ``@ v`` replaced by ``self.structattn``.

    Shapes:
        hidden_states (b, n, d_model); attention_mask (b, 1, n, n) or broadcastable (1 = may attend); returns
        context (b, n, h * d) and, with ``output_attentions``, weights (b, h, n, n).
    """
    if query_states is None:
        query_states = hidden_states
    h = self.num_attention_heads
    q = self.transpose_for_scores(self.query_proj(query_states), h)  # (b * h, n, d), DeBERTa's layout
    k = self.transpose_for_scores(self.key_proj(hidden_states), h)
    v = self.transpose_for_scores(self.value_proj(hidden_states), h)
    scale_factor = 1 + ("c2p" in self.pos_att_type) + ("p2c" in self.pos_att_type)
    rel_att = None
    if self.relative_attention:
        rel_att = self.disentangled_attention_bias(q, k, relative_pos, self.pos_dropout(rel_embeddings), scale_factor)
    q, k, v = (rearrange(x, "(b h) n d -> b h n d", h=h) for x in (q, k, v))
    model_bias = None if rel_att is None else rearrange(rel_att, "(b h) i j -> b h i j", h=h)
    token_mask = _padding(attention_mask, q.shape[0], q.shape[2])
    out, weights = self.structattn(q / scale_factor**0.5, k, v, token_mask, interface.active_structures(),
                                   return_weights=bool(output_attentions), model_bias=model_bias)
    return rearrange(out, "b h n d -> b n (h d)"), weights


def _padding(attention_mask: torch.Tensor, b: int, n: int) -> torch.Tensor:
    """``token_mask`` (b, n) from DeBERTa's pair mask ``m_i * m_j`` (b, 1, n, n), read from its diagonal.

    Raises:
        ValueError: the mask is not that outer product of one padding mask (causal or otherwise structured).
    """
    allowed = attention_mask.bool().expand(b, 1, n, n)[:, 0]  # (b, n, n)
    token_mask = allowed.diagonal(dim1=-2, dim2=-1)
    if not torch.equal(allowed, token_mask[:, :, None] & token_mask[:, None, :]):
        raise ValueError("structattn.hf (DeBERTa-v2): the attention mask is not a padding mask (causal or "
                         "structured masks are not supported; only padding is)")
    return token_mask
