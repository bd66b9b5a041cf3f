"""Random inputs for the contract checks: trees, sentences, batched structures, q/k/v and padding.

Sizes are pairwise distinct (b=2, h=3, n=7, d=5) so that axis mix-ups fail; the second sentence is padded.
Glossary: b batch, h heads, n tokens, d head dim.
"""

from __future__ import annotations

import random
from dataclasses import replace

import torch
import torch.nn.functional as F

from structattn.structures import Document, Sentence, Structure, get_provider

B, H, N, D = 2, 3, 7, 5
LENGTHS = (7, 5)


def random_heads(length: int, generator: torch.Generator) -> list[int]:
    """A uniformly shuffled random recursive tree: 0-based heads, -1 for the root."""
    order = torch.randperm(length, generator=generator).tolist()
    heads = [-1] * length
    for t in range(1, length):
        heads[order[t]] = order[int(torch.randint(t, (1,), generator=generator))]
    return heads


def random_tree_sentence(length: int, generator: torch.Generator, sentence_id: str) -> Sentence:
    """Words ``w0 .. w{length-1}`` with a random tree."""
    return Sentence(words=[f"w{i}" for i in range(length)], heads=random_heads(length, generator), id=sentence_id)


def dependency_structure(lengths: list[int], generator: torch.Generator, forests: bool = False) -> Structure:
    """Batched ``dependency`` structure of random trees (the real provider); with ``forests``, items of 4+
    tokens are documents of two sentences, so words of different sentences are unreachable (-1)."""
    items: list[Sentence | Document] = []
    for k, length in enumerate(lengths):
        if forests and length >= 4:
            cut = length // 2
            parts = [random_tree_sentence(cut, generator, f"d{k}a"), random_tree_sentence(length - cut, generator, f"d{k}b")]
            items.append(Document(sentences=parts, id=f"d{k}"))
        else:
            items.append(random_tree_sentence(length, generator, f"s{k}"))
    return get_provider("dependency").batch(items)


def random_qkv(b: int, h: int, n: int, d: int, generator: torch.Generator,
               dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three ``(b, h, n, d)`` leaf tensors that require grad."""
    return tuple(torch.randn(b, h, n, d, generator=generator, dtype=dtype).requires_grad_() for _ in range(3))  # type: ignore[return-value]


def pad_structure(structure: Structure, extra: int) -> Structure:
    """The batched structure with ``extra`` padded tokens appended (-1 / False; compact window form kept)."""

    def square(t: torch.Tensor | None, value: object) -> torch.Tensor | None:
        return None if t is None else F.pad(t, (0, extra, 0, extra), value=value)

    def row(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else F.pad(t, (0, extra), value=False)

    return replace(structure, distance=square(structure.distance, -1), adjacency=square(structure.adjacency, False),
                   token_mask=row(structure.token_mask), is_global=row(structure.is_global))


def fill_padding(x: torch.Tensor, token_mask: torch.Tensor, value: float, token_dim: int) -> torch.Tensor:
    """``x`` with every padded position along ``token_dim`` set to ``value``. Shapes: token_mask (b, n)."""
    shape = [1] * x.dim()
    shape[0], shape[token_dim] = token_mask.shape
    return torch.where(token_mask.view(shape), x, torch.full_like(x, value))


def random_annotated(length: int, rng: random.Random, requires: tuple[str, ...], sentence_id: str) -> Sentence:
    """A sentence carrying what a provider ``requires``: a random tree (``heads``), random extra graph edges
    (``edges``: the tree's edges, some dropped, plus random ones) and random coreference clusters (``coref``)."""
    order = list(range(length))
    rng.shuffle(order)
    heads = [-1] * length
    for t in range(1, length):
        heads[order[t]] = order[rng.randrange(t)]
    annotations: dict[str, object] = {"heads": heads}
    if "edges" in requires:
        edges = [(h, d) for d, h in enumerate(heads) if h >= 0 and rng.random() < 0.8]
        edges += [(rng.randrange(length), rng.randrange(length)) for _ in range(rng.randrange(length // 2 + 1))]
        annotations["edges"] = [(h, d, "dep") for h, d in edges if h != d]
    if "coref" in requires:
        clusters = []
        for _ in range(rng.randrange(1, 3)):
            spans = [rng.randrange(length) for _ in range(rng.randrange(1, 4))]
            clusters.append([(s, min(length, s + rng.randrange(1, 3))) for s in spans])
        annotations["coref"] = clusters
    return Sentence([f"w{i}" for i in range(length)], id=sentence_id, **annotations)  # type: ignore[arg-type]
