"""Contract-test case for ``full``."""

from __future__ import annotations

import torch

from structattn.attention import StructuredAttention, get_attention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure
from tests.reference.full import full_reference


def make(num_heads: int, head_dim: int) -> StructuredAttention:
    return get_attention("full", num_heads=num_heads, head_dim=head_dim)


def make_structure(lengths: list[int], generator: torch.Generator) -> Structure:
    return dependency_structure(lengths, generator)


def reference(q, k, v, structure, module, hidden=None):
    return full_reference(q, k, v, structure.token_mask)
