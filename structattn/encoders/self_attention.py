"""Multi-head self-attention whose heads are split into groups, each a structured attention variant."""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from structattn.attention.base import StructuredAttention
from structattn.attention.learned import LearnedQuantity
from structattn.encoders.plan import HeadGroup
from structattn.structures.structure import Structure


class StructuredSelfAttention(nn.Module):
    """Project to q, k, v, let each head group attend with its own variant over its own structure, merge.

    Args:
        d_model: model width (``num_heads * head_dim``).
        groups: the head groups of this layer (their ``num_heads`` add up to the layer's heads).
        modules: the variant module of each group, built with ``num_heads=group.num_heads``.

    Shapes:
        x: (b, n, d_model); structures: name -> batched Structure over (b, n); returns (b, n, d_model) and,
        with ``return_weights``, weights (b, h, n, n) with the groups' heads in order.
    """

    def __init__(self, d_model: int, groups: list[HeadGroup], modules: list[StructuredAttention]) -> None:
        super().__init__()
        self.num_heads = sum(g.num_heads for g in groups)
        if d_model % self.num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by {self.num_heads} heads")
        self.groups = list(groups)
        self.variants = nn.ModuleList(modules)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(
        self,
        x: torch.Tensor,
        structures: dict[str | None, Structure],
        return_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.num_heads)
        outs, weights, start = [], [], 0
        for group, module in zip(self.groups, self.variants):
            heads = slice(start, start + group.num_heads)
            start += group.num_heads
            result = module(q[:, heads], k[:, heads], v[:, heads], structures[group.structure], hidden=x,
                            return_weights=return_weights)
            out, w = result if return_weights else (result, None)
            outs.append(out)
            weights.append(w)
        merged = rearrange(torch.cat(outs, dim=1), "b h n d -> b n (h d)")
        return self.out(merged), torch.cat(weights, dim=1) if return_weights else None

    def learned_quantities(self) -> dict[str, list[LearnedQuantity]]:
        """Each group's :meth:`~structattn.attention.base.StructuredAttention.learned_quantities`, by group label
        (prefixed with the group's position when the layer has several groups); groups reporting none left out."""
        out = {}
        for k, (group, module) in enumerate(zip(self.groups, self.variants)):
            quantities = module.learned_quantities()
            if quantities:
                out[group.label if len(self.groups) == 1 else f"{k}:{group.label}"] = quantities
        return out

    def bias_tables(self) -> dict[str, torch.Tensor]:
        """The learned quantities' values ``(h or 1, K)`` by group label (``label/name`` when a group reports
        several), e.g. ``soft_bias``'s effective table ``scale * table``."""
        out = {}
        for label, quantities in self.learned_quantities().items():
            for quantity in quantities:
                out[label if len(quantities) == 1 else f"{label}/{quantity.name}"] = quantity.values
        return out
