"""Contract-test case for ``hard_mask``: radius 1 on heads 0 and 2, head 1 free."""

from __future__ import annotations

import torch

from structattn.attention import StructuredAttention, get_attention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure
from tests.reference.hard_mask import hard_mask_reference


def make(num_heads: int, head_dim: int, **options) -> StructuredAttention:
    options = {"radius": 1, "masked_heads": [x for x in range(num_heads) if x != 1], **options}
    return get_attention("hard_mask", num_heads=num_heads, head_dim=head_dim, **options)


def make_structure(lengths: list[int], generator: torch.Generator) -> Structure:
    return dependency_structure(lengths, generator, forests=True)


def reference(q, k, v, structure, module, hidden=None):
    masked = module.is_masked_head.nonzero().flatten().tolist()
    return hard_mask_reference(module.radius, masked, q, k, v, structure.distance, structure.token_mask)
