"""Attention variants behind one contract (see ``structattn.attention.base``).

The built-in variants (``structattn.attention.builtin``) are registered on the registry's first lookup
(:func:`get_attention`, :func:`attention_names`, ``ATTENTION.get``): importing this package imports no variant.
Variants that add a score bias derive from :class:`~structattn.attention.biased.BiasedAttention`.
"""

from structattn.attention.base import (
    ATTENTION,
    StructuredAttention,
    attention_names,
    get_attention,
    register_attention,
)
from structattn.attention.biased import BiasedAttention
from structattn.attention.learned import LearnedQuantity

__all__ = [
    "ATTENTION",
    "BiasedAttention",
    "LearnedQuantity",
    "StructuredAttention",
    "attention_names",
    "get_attention",
    "register_attention",
]
