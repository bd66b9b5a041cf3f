"""``dependency``: hops in the undirected basic dependency tree."""

from __future__ import annotations

import numpy as np
import torch

from structattn.structures.distances import tree_distances
from structattn.structures.providers.base import (
    GraphProvider,
    Item,
    item_heads,
    register_provider,
)
from structattn.structures.sentence import Sentence
from structattn.structures.single_tree import single_tree_distance, tree_adjacency
from structattn.structures.structure import Structure


@register_provider("dependency")
class DependencyProvider(GraphProvider):
    """Tree distance (hops between words in the undirected basic tree) and adjacency (head-dependent pairs
    plus self-loops). A :class:`Document` gives a forest: words of different sentences are unreachable (-1).
    Distances come from the vectorised tree engine (depth + ancestors), not BFS."""

    requires = ("heads",)
    symmetric = True  # undirected tree / graph: distance[i, j] == distance[j, i]

    def single(self, item: Item) -> Structure | None:
        """One sentence without the batched engine's set-up cost (see ``single_tree.py``); ``None`` (use the
        batch path) for long sentences or when a subclass changes how edges or distances are computed."""
        cls = type(self)
        if cls.compute is not DependencyProvider.compute or cls.graph_edges is not DependencyProvider.graph_edges:
            return None
        heads = item.heads if isinstance(item, Sentence) else item_heads(item)
        distance = single_tree_distance(heads)
        if distance is None:
            return None
        return Structure(distance=torch.from_numpy(distance), adjacency=tree_adjacency(distance),
                         token_mask=torch.ones(len(heads), dtype=torch.bool))

    def graph_edges(self, item: Item) -> list[tuple[int, int]]:
        return [(i, h) for i, h in enumerate(item_heads(item)) if h >= 0]

    def compute(self, items: list[Item]) -> Structure:
        lengths = np.array([len(x) for x in items])
        real = np.arange(lengths.max())[None, :] < lengths[:, None]
        heads = np.full(real.shape, -1, dtype=np.int64)
        heads[real] = np.fromiter((h for item in items for h in item_heads(item)), dtype=np.int64,
                                  count=int(lengths.sum()))
        distance = tree_distances(torch.from_numpy(heads), torch.from_numpy(real))
        # in a tree the head-dependent pairs are exactly the pairs 1 hop apart, and -1 (other tree, padding)
        # is 65535 as uint16: one comparison gives the adjacency with self-loops and False on padding
        return Structure(distance=distance, adjacency=tree_adjacency(distance), token_mask=torch.from_numpy(real))
