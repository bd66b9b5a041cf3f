"""Attention variants behind one contract (see ``structattn.attention.base``)."""

from structattn.attention.base import (
    ATTENTION,
    StructuredAttention,
    attention_names,
    get_attention,
    register_attention,
)

__all__ = ["ATTENTION", "StructuredAttention", "attention_names", "get_attention", "register_attention"]
from structattn.attention import local_global, ssan  # noqa: E402,F401  (registers "local_global", "ssan")
from structattn.attention import fixed_decay, full, hard_mask, soft_bias  # noqa: E402,F401  (registers "fixed_decay", "full", "hard_mask", "soft_bias")
