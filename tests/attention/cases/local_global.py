"""Contract case for ``local_global``: a real window structure (radius, dilation, two global tokens)."""

from __future__ import annotations

import torch

from structattn.attention import get_attention
from structattn.attention.base import StructuredAttention
from structattn.structures import Sentence, Structure, get_provider
from tests.reference.local_global import local_global_reference


def make(num_heads: int, head_dim: int) -> StructuredAttention:
    """The chunked backend (the default on CPU), with a small block so that several blocks are exercised."""
    return get_attention("local_global", num_heads=num_heads, head_dim=head_dim, backend="chunked", block_size=2)


def make_structure(lengths: list[int], generator: torch.Generator) -> Structure:
    """Window provider with a random radius (1-2) and dilation (1-2); the first and last tokens are global."""
    radius = int(torch.randint(1, 3, (1,), generator=generator))
    dilation = int(torch.randint(1, 3, (1,), generator=generator))
    sentences = [Sentence(words=[f"w{i}" for i in range(n)], id=f"s{k}") for k, n in enumerate(lengths)]
    return get_provider("window", radius=radius, dilation=dilation, global_tokens=(0, "last")).batch(sentences)


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, structure: Structure, module: StructuredAttention,
    hidden: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Longformer oracle (tests/reference/local_global.py) on the structure's compact window form."""
    return local_global_reference(
        q, k, v, structure.token_mask, structure.window_radius, structure.dilation, structure.is_global
    )
