"""Per-variant test cases for the attention contract tests.

Every registered attention variant ``NAME`` has a module ``tests/attention/cases/NAME.py`` defining::

    def make(num_heads: int, head_dim: int) -> StructuredAttention      # via get_attention(NAME, ...)
    def make_structure(lengths: list[int], generator: torch.Generator) -> Structure   # batched, real providers
    def reference(module, q, k, v, structure, hidden) -> tuple[Tensor, Tensor]      # float64 oracle
    def needs_hidden() -> bool

``tests/attention/test_contract.py`` calls the module first and ``reference`` right after it (same mode), so a
stochastic variant can replay its last noise draw. ``hidden`` has shape ``(b, n, num_heads * head_dim)``.
The helpers below build random trees and inputs for the case modules and tests.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from types import ModuleType

import torch
import torch.nn.functional as F

from structattn.structures import Document, Sentence, Structure, get_provider


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
            "(define make, make_structure, reference, needs_hidden; see tests/attention/cases/__init__.py)"
        ) from None


def random_heads(length: int, generator: torch.Generator) -> list[int]:
    """A uniformly shuffled random tree: 0-based heads, -1 for the root."""
    order = torch.randperm(length, generator=generator).tolist()
    heads = [-1] * length
    for t in range(1, length):
        heads[order[t]] = order[int(torch.randint(t, (1,), generator=generator))]
    return heads


def random_sentence(length: int, generator: torch.Generator, sentence_id: str) -> Sentence:
    return Sentence(words=[f"w{i}" for i in range(length)], heads=random_heads(length, generator), id=sentence_id)


def dependency_structure(lengths: list[int], generator: torch.Generator, forests: bool = False) -> Structure:
    """Batched ``dependency`` structure of random trees; with ``forests``, items of 4+ tokens are documents
    of two sentences, so words of different sentences are unreachable (distance -1)."""
    items = []
    for k, length in enumerate(lengths):
        if forests and length >= 4:
            cut = length // 2
            parts = [random_sentence(cut, generator, f"d{k}a"), random_sentence(length - cut, generator, f"d{k}b")]
            items.append(Document(sentences=parts, id=f"d{k}"))
        else:
            items.append(random_sentence(length, generator, f"s{k}"))
    return get_provider("dependency").batch(items)


def random_qkv(b: int, h: int, n: int, d: int, generator: torch.Generator, dtype: torch.dtype = torch.float64):
    """Three ``(b, h, n, d)`` leaf tensors that require grad."""
    return tuple(torch.randn(b, h, n, d, generator=generator, dtype=dtype).requires_grad_() for _ in range(3))


def pad_structure(structure: Structure, extra: int) -> Structure:
    """The batched structure with ``extra`` padded tokens appended (compact window form kept)."""

    def square(t, value):
        return None if t is None else F.pad(t, (0, extra, 0, extra), value=value)

    def row(t):
        return None if t is None else F.pad(t, (0, extra), value=False)

    return replace(
        structure,
        distance=square(structure.distance, -1),
        adjacency=square(structure.adjacency, False),
        token_mask=row(structure.token_mask),
        is_global=row(structure.is_global),
    )


def fill_padding(x: torch.Tensor, token_mask: torch.Tensor, value: float, token_dim: int) -> torch.Tensor:
    """``x`` with every padded position along ``token_dim`` set to ``value`` (large finite garbage)."""
    shape = [1] * x.dim()
    shape[0], shape[token_dim] = token_mask.shape
    return torch.where(token_mask.view(shape), x, torch.full_like(x, value))
