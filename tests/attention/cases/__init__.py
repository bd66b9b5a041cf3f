"""Per-variant cases for the attention contract (``tests/attention/test_contract.py``), run by the installed
kit ``structattn.testing`` exactly as a user's plugin would be.

Every registered attention variant ``NAME`` has a module ``tests/attention/cases/NAME.py`` defining::

    def make(num_heads: int, head_dim: int) -> StructuredAttention      # via get_attention(NAME, ...)
    def make_structure(lengths: list[int], generator: torch.Generator) -> Structure   # batched, real providers
    def reference(q, k, v, structure, module, hidden=None) -> tuple[Tensor, Tensor]  # float64 oracle

The kit calls the module first and ``reference`` right after it (same mode), so a stochastic variant can
replay its last noise draw. ``hidden`` (variants with ``needs_hidden``) has shape ``(b, n, num_heads * head_dim)``.
The input helpers are the kit's (``structattn.testing.inputs``), re-exported for the per-variant tests.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from structattn.testing import AttentionCase
from structattn.testing.inputs import (  # noqa: F401  (re-exported for the per-variant tests)
    dependency_structure,
    fill_padding,
    pad_structure,
    random_heads,
    random_qkv,
)
from structattn.testing.inputs import random_tree_sentence as random_sentence  # noqa: F401


def load_case(name: str) -> ModuleType:
    """The case module of variant ``name``; a missing one is an error naming the file to add."""
    module_name = f"tests.attention.cases.{name}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        raise AssertionError(
            f"attention variant {name!r} is registered but has no case module tests/attention/cases/{name}.py "
            "(define make, make_structure, reference; see tests/attention/cases/__init__.py)"
        ) from None


def kit_case(name: str) -> AttentionCase:
    """The kit's :class:`AttentionCase` for variant ``name``, from its case module."""
    case = load_case(name)
    for hook in ("make", "make_structure", "reference"):
        assert callable(getattr(case, hook, None)), f"tests/attention/cases/{name}.py lacks {hook}()"
    return AttentionCase(name, case.reference, make=case.make, structure_factory=case.make_structure)
