"""Attention variants behind one contract (see ``structattn.attention.base``)."""

from structattn.attention.base import (
    ATTENTION,
    StructuredAttention,
    attention_names,
    get_attention,
    register_attention,
)

__all__ = ["ATTENTION", "StructuredAttention", "attention_names", "get_attention", "register_attention"]
