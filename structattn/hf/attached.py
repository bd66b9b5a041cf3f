"""The structattn part of one attached Hugging Face self-attention layer: head groups and their variants.

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn

from structattn.attention.base import StructuredAttention
from structattn.encoders.plan import HeadGroup
from structattn.hf.model_terms import attend_with_model_terms
from structattn.structures.structure import Structure


class AttachedAttention(nn.Module):
    """Head groups of one layer, each attending with its own structattn variant over its own structure.

    It lives as the submodule ``structattn`` of the HF self-attention module, so its parameters (bias tables,
    SSAN policies) are that layer's parameters and are saved by ``save_pretrained``. The layer's q/k/v/out
    projections stay the model's: this module only receives their outputs.

    Args:
        layer: the layer index (for error messages).
        groups: the layer's head groups, in head order.
        variants: one module per group, built for ``group.num_heads`` heads.

    The model's own score terms of the layer, when it has any (T5's position bias, DeBERTa's disentangled
    scores, ModernBERT's sliding window), come as ``model_bias`` / ``model_allowed`` and are kept: each group
    adds its variant's bias to them and intersects its allowed keys with them
    (:func:`~structattn.hf.model_terms.attend_with_model_terms`).

    Shapes:
        q, k, v: (b, h, n, d); token_mask: (b, n); hidden: (b, n, d_model) or None; model_bias: (b or 1, h or 1,
        n, n) or None; model_allowed: bool broadcastable to (b, h, n, n) or None; returns out (b, h, n, d) and,
        with ``return_weights``, weights (b, h, n, n) (the groups' heads in order).
    """

    def __init__(self, layer: int, groups: list[HeadGroup], variants: list[StructuredAttention]) -> None:
        super().__init__()
        if len(groups) != len(variants) or not groups:
            raise ValueError(f"layer {layer}: {len(groups)} head groups for {len(variants)} variant modules")
        self.layer = layer
        self.groups = list(groups)
        self.variants = nn.ModuleList(variants)
        self.needs_hidden = any(v.needs_hidden for v in variants)
        self.hidden: torch.Tensor | None = None  # the layer input, set by a forward pre-hook when needed

    def structure_names(self) -> set[str]:
        """Names of the structures this layer reads."""
        return {g.structure for g in self.groups if g.structure is not None}

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        token_mask: torch.Tensor,
        structures: Mapping[str, Structure] | None,
        return_weights: bool = False,
        model_bias: torch.Tensor | None = None,
        model_allowed: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden, self.hidden = self.hidden, None
        if self.needs_hidden and hidden is None:
            raise RuntimeError(f"layer {self.layer}: the layer input was not captured (attach registers a pre-hook)")
        outs, weights, start = [], [], 0
        for group, module in zip(self.groups, self.variants):
            heads = slice(start, start + group.num_heads)
            start += group.num_heads
            structure = self._structure(group, structures, token_mask)
            if model_bias is None and model_allowed is None:
                result = module(q[:, heads], k[:, heads], v[:, heads], structure, hidden=hidden,
                                return_weights=return_weights)
                out, w = result if return_weights else (result, None)
            else:
                bias = None if model_bias is None else model_bias[:, heads] if model_bias.shape[1] > 1 else model_bias
                out, w = attend_with_model_terms(module, q[:, heads], k[:, heads], v[:, heads], structure, bias,
                                                 model_allowed, return_weights)
            outs.append(out)
            weights.append(w)
        out = torch.cat(outs, dim=1) if len(outs) > 1 else outs[0]
        return out, torch.cat(weights, dim=1) if return_weights else None

    def _structure(
        self, group: HeadGroup, structures: Mapping[str, Structure] | None, token_mask: torch.Tensor
    ) -> Structure:
        """The group's structure, checked against the batch's padding (or one carrying only the padding)."""
        if group.structure is None:
            return Structure(token_mask=token_mask)
        where = f"layer {self.layer}, group {group.label!r}"
        if structures is None or group.structure not in structures:
            given = sorted(structures) if structures else []
            raise ValueError(
                f"{where} needs structure {group.structure!r}, but the forward call carries {given or 'no structures'}"
                "; pass structures={...} to the model (StructureCollator builds them) or use structattn.hf.structures"
            )
        structure = structures[group.structure]
        b, n = token_mask.shape
        if not structure.is_batched or tuple(structure.token_mask.shape) != (b, n):
            raise ValueError(
                f"{where}: structure {group.structure!r} covers {tuple(structure.token_mask.shape)} tokens, the "
                f"batch has ({b}, {n}); build it on the model's tokens (StructureCollator) and collate it"
            )
        structure_mask = structure.token_mask.to(token_mask.device)
        if not torch.equal(structure_mask, token_mask):
            row = int((structure_mask != token_mask).any(-1).nonzero()[0])
            raise ValueError(
                f"{where}: structure {group.structure!r} pads row {row} differently from the attention_mask "
                f"({int(structure_mask[row].sum())} vs {int(token_mask[row].sum())} real tokens)"
            )
        return structure if structure_mask is structure.token_mask else structure.to(token_mask.device)
