"""Contract-test case for ``fixed_decay`` (small max_distance so that clamping happens; forests so that the
unreachable penalty is used)."""

from __future__ import annotations

import torch

from structattn.attention import StructuredAttention, get_attention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure
from tests.reference.fixed_decay import fixed_decay_reference


def make(num_heads: int, head_dim: int, **options) -> StructuredAttention:
    options = {"alpha": 0.7, "max_distance": 3, **options}
    return get_attention("fixed_decay", num_heads=num_heads, head_dim=head_dim, **options)


def make_structure(lengths: list[int], generator: torch.Generator) -> Structure:
    return dependency_structure(lengths, generator, forests=True)


def reference(q, k, v, structure, module, hidden=None):
    alpha = float(module.alpha)
    return fixed_decay_reference(alpha, module.max_distance, q, k, v, structure.distance, structure.token_mask)
