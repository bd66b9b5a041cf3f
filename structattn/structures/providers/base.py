"""Provider registry and base classes.

A provider turns one annotated :class:`Sentence` (or :class:`Document`) into a :class:`Structure`. Providers
are deterministic, parameter-free and CPU-side. ``provider(item)`` returns the structure of one item;
``provider.batch(items)`` computes a whole padded batch in one vectorised pass and equals
``collate([provider(x) for x in items])``.

A new source is one subclass with one hook (see :class:`GraphProvider`) and one decorator::

    @register_provider("my_graph")
    class MyGraph(GraphProvider):
        requires = ("meta",)

        def graph_edges(self, item):
            return item.meta["my_edges"]  # [(i, j), ...], undirected
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Sequence, Union

import torch

from structattn.registry import Registry
from structattn.structures.distances import graph_distances
from structattn.structures.options import DerivedOptions
from structattn.structures.sentence import Document, Sentence
from structattn.structures.single_graph import single_graph_distance
from structattn.structures.structure import Structure

Item = Union[Sentence, Document]

PROVIDERS: Registry["StructureProvider"] = Registry("structure provider", builtin="structattn.structures.providers.builtin")
register_provider = PROVIDERS.register


def get_provider(name: str, **options: Any) -> "StructureProvider":
    """Build the provider registered as ``name`` with ``options`` (a bad option: ``ValueError`` naming it)."""
    return PROVIDERS.build(name, **options)


def provider_names() -> list[str]:
    """Names of every registered provider."""
    return PROVIDERS.names()


class StructureProvider(DerivedOptions, ABC):
    """Base provider.

    ``options()`` (part of cache keys) lists the constructor's arguments by default, defaults applied; a
    subclass that overrides it must return every argument (or list it in ``options_ignored`` when it cannot
    change the output), else building a key raises ``ValueError`` (see :mod:`structattn.structures.options`).

    Class attributes:
        requires: annotations the item must carry (``"heads"``, ``"edges"``, ``"coref"``).
        provides: structure fields the provider fills (checked by attention variants at build time).
        options_ignored: constructor arguments that do not change the output (kept out of cache keys).
    """

    name: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()
    provides: ClassVar[frozenset[str]] = frozenset({"distance", "adjacency", "token_mask"})

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options_unchecked().items())
        return f"{type(self).__name__}({opts})"

    def check(self, item: Item) -> None:
        """Raise ``ValueError`` when ``item`` lacks an annotation the provider requires (``TypeError`` when it
        is no :class:`Sentence` or :class:`Document`: a string, a list of words, a list of sentences)."""
        if not isinstance(item, (Sentence, Document)):
            raise TypeError(f"provider {self.name!r}: expected a Sentence or Document, got {_not_an_item(item)}")
        if len(item) == 0:
            raise ValueError(f"provider {self.name!r}: {type(item).__name__} {item.id!r} is empty")
        for annotation in self.requires:
            if not self._has(item, annotation):
                raise ValueError(
                    f"provider {self.name!r} needs {annotation!r} annotation, but {type(item).__name__.lower()} "
                    f"{item.id!r} has none"
                )

    @staticmethod
    def _has(item: Item, annotation: str) -> bool:
        if isinstance(item, Document):
            if annotation == "coref":
                return item.coref is not None or all(s.coref is not None for s in item.sentences)
            return all(s.has(annotation) for s in item.sentences)
        return item.has(annotation)

    def __call__(self, item: Item) -> Structure:
        """Structure of one item: unbatched tensors of shape ``(n, n)``.

        Uses :meth:`single` when the provider has a per-item fast path, else a batch of one; both give the
        same tensors as item ``k`` of :meth:`batch`, cropped to its length."""
        self.check(item)
        out = self.single(item)
        if out is None:
            return _unbatch(self.batch([item]), 0)
        out.source, out.ids = self.name, [item.id]
        return out

    def single(self, item: Item) -> Structure | None:
        """Hook: the unbatched structure of one checked item, computed faster than a batch of one, or
        ``None`` to use :meth:`batch` (the default)."""
        return None

    def batch(self, items: Sequence[Item]) -> Structure:
        """Structures of ``items`` as one padded batch ``(b, n, n)``."""
        if len(items) == 0:
            raise ValueError(f"provider {self.name!r}: empty batch")
        for item in items:
            self.check(item)
        out = self.compute(list(items))
        out.source = self.name
        out.ids = [x.id for x in items]
        return out

    @abstractmethod
    def compute(self, items: list[Item]) -> Structure:
        """Hook: the batched structure of already-checked items."""

    def many(self, items: Sequence[Item]) -> list[Structure]:
        """Per-item structures computed in one batched pass."""
        batched = self.batch(items)
        return [_unbatch(batched, i) for i in range(len(items))]


class GraphProvider(StructureProvider):
    """A provider defined by an undirected edge list per item; distances by batched BFS."""

    @abstractmethod
    def graph_edges(self, item: Item) -> list[tuple[int, int]]:
        """Hook: undirected edges ``(i, j)`` over the item's word indices."""

    def single(self, item: Item) -> Structure | None:
        """One small item by a breadth-first search in Python (see ``single_graph.py``); ``None`` (the batch
        path) for long items or when a subclass computes distances its own way."""
        if type(self).compute is not GraphProvider.compute:
            return None
        found = single_graph_distance(len(item), self.graph_edges(item))
        if found is None:
            return None
        distance, adjacency = found
        return Structure(distance=torch.from_numpy(distance), adjacency=torch.from_numpy(adjacency),
                         token_mask=torch.ones(len(item), dtype=torch.bool))

    def compute(self, items: list[Item]) -> Structure:
        token_mask = lengths_token_mask([len(x) for x in items])
        edge_index = batch_edge_index([self.graph_edges(x) for x in items])
        distance = graph_distances(edge_index, token_mask)
        return Structure(distance=distance, adjacency=adjacency_from_edges(edge_index, token_mask), token_mask=token_mask)


def lengths_token_mask(lengths: list[int]) -> torch.Tensor:
    """``token_mask`` of a batch of items with these lengths. Shapes: ``(b, max(lengths))``, True on tokens."""
    n = max(lengths)
    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]


def _not_an_item(value: Any) -> str:
    """What a provider was given instead of an item, and what to pass instead (one line)."""
    kind = type(value).__name__
    if isinstance(value, str):
        return f"{kind} ({value[:40]!r}); build one: Sentence(words=text.split(), ...)"
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return f"{kind} of str ({list(value[:5])!r}); build one: Sentence(words=[...], ...)"
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (Sentence, Document)) for v in value):
        return f"{kind} of {len(value)} Sentence/Document items; for several, call provider.batch(items) or provider.many(items)"
    return kind


def batch_edge_index(edges_per_item: list[list[tuple[int, int]]]) -> torch.Tensor:
    """Stack per-item edge lists into one ``(3, E)`` long tensor of rows (batch, source, target)."""
    rows = [(b, i, j) for b, edges in enumerate(edges_per_item) for i, j in edges]
    if not rows:
        return torch.zeros(3, 0, dtype=torch.long)
    return torch.tensor(rows, dtype=torch.long).T.contiguous()


def item_heads(item: Item) -> list[int] | None:
    """Basic-tree heads over the item's words (a document's sentences become a forest, one root each), or
    ``None`` when some sentence has none."""
    if isinstance(item, Sentence):
        return None if item.heads is None else list(item.heads)
    if any(s.heads is None for s in item.sentences):
        return None
    return [h + off if h >= 0 else -1 for s, off in zip(item.sentences, item.offsets) for h in s.heads]


def adjacency_from_edges(edge_index: torch.Tensor, token_mask: torch.Tensor, directed: bool = False) -> torch.Tensor:
    """Bool ``(b, n, n)`` adjacency with self-loops on real tokens and ``False`` on padding."""
    b, n = token_mask.shape
    adj = torch.zeros(b, n, n, dtype=torch.bool)
    adj[edge_index[0], edge_index[1], edge_index[2]] = True
    if not directed:
        adj[edge_index[0], edge_index[2], edge_index[1]] = True
    adj |= torch.eye(n, dtype=torch.bool) & token_mask[:, :, None]
    return adj & token_mask[:, :, None] & token_mask[:, None, :]


def _unbatch(batched: Structure, index: int) -> Structure:
    """Item ``index`` of a batch, cropped to its length."""
    n = int(batched.token_mask[index].sum())

    def crop(t: torch.Tensor | None, dims: int) -> torch.Tensor | None:
        if t is None:
            return None
        t = t[index]
        return t[:n, :n] if dims == 2 else t[:n]

    return Structure(
        distance=crop(batched.distance, 2),
        adjacency=crop(batched.adjacency, 2),
        token_mask=crop(batched.token_mask, 1),
        window_radius=batched.window_radius,
        dilation=batched.dilation,
        is_global=crop(batched.is_global, 1),
        directed=batched.directed,
        source=batched.source,
        ids=batched.ids[index:index + 1],
    )

