"""Contract-test case for ``soft_bias``: shared table with a learnable scale, random non-zero table values,
forests so that the unreachable bucket is used."""

from __future__ import annotations

import torch

from structattn.attention import StructuredAttention, get_attention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure
from tests.reference.soft_bias import soft_bias_reference


def make(num_heads: int, head_dim: int, **options) -> StructuredAttention:
    options = {"max_distance": 3, "learnable_scale": True, **options}
    module = get_attention("soft_bias", num_heads=num_heads, head_dim=head_dim, **options)
    generator = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        module.table.copy_(torch.randn(module.table.shape, generator=generator))
        if module.scale is not None:
            module.scale.fill_(1.5)
    return module


def make_structure(lengths: list[int], generator: torch.Generator) -> Structure:
    return dependency_structure(lengths, generator, forests=True)


def reference(q, k, v, structure, module, hidden=None):
    return soft_bias_reference(module, q, k, v, structure.distance, structure.token_mask)
