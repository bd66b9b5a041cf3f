"""Contract case for ``ssan``: plain selective attention (no structure field needed; padding from a real
dependency structure), compared in train mode by replaying the module's Gumbel noise."""

from __future__ import annotations

import torch

from structattn.attention import get_attention
from structattn.attention.base import StructuredAttention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure
from tests.reference.ssan import ssan_reference

SEED = 1234


def make(num_heads: int, head_dim: int) -> StructuredAttention:
    """``d_model`` defaults to ``num_heads * head_dim``; the noise generator is seeded (replayed by the oracle).

    ``threshold=0.1`` (select when ``E > tau * logit(0.1)``, about 9 pairs in 10 at initialisation): the
    contract's rows-sum-to-one check expects every real row to have an allowed key, while an SSAN row with
    nothing selected is all-zero by design (checked in test_ssan.py). At the default threshold an empty row
    among the contract's 42 has a probability of roughly 1 in 4.
    """
    return get_attention("ssan", num_heads=num_heads, head_dim=head_dim, generator=SEED, threshold=0.1)


def make_structure(lengths: list[int], generator: torch.Generator) -> Structure:
    """Random dependency trees through the real ``dependency`` provider."""
    return dependency_structure(lengths, generator)


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, structure: Structure | None, module: StructuredAttention,
    hidden: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 oracle of tests/reference/ssan.py (replays the noise of the module's last forward)."""
    assert hidden is not None
    token_mask = None if structure is None else structure.token_mask
    return ssan_reference(module, q, k, v, token_mask, hidden)
