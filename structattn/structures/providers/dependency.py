"""``dependency``: hops in the undirected basic dependency tree."""

from __future__ import annotations

import numpy as np
import torch

from structattn.structures.distances import tree_distances
from structattn.structures.providers.base import (
    GraphProvider,
    Item,
    adjacency_from_edges,
    item_heads,
    register_provider,
)
from structattn.structures.structure import Structure


@register_provider("dependency")
class DependencyProvider(GraphProvider):
    """Tree distance (hops between words in the undirected basic tree) and adjacency (head-dependent pairs
    plus self-loops). A :class:`Document` gives a forest: words of different sentences are unreachable (-1).
    Distances come from the vectorised tree engine (depth + ancestors), not BFS."""

    requires = ("heads",)
    symmetric = True  # undirected tree / graph: distance[i, j] == distance[j, i]

    def graph_edges(self, item: Item) -> list[tuple[int, int]]:
        return [(i, h) for i, h in enumerate(item_heads(item)) if h >= 0]

    def compute(self, items: list[Item]) -> Structure:
        lengths = np.array([len(x) for x in items])
        token_mask = torch.from_numpy(np.arange(lengths.max())[None, :] < lengths[:, None])
        flat = np.fromiter((h for item in items for h in item_heads(item)), dtype=np.int64, count=int(lengths.sum()))
        heads = torch.full(token_mask.shape, -1, dtype=torch.long)
        heads[token_mask] = torch.from_numpy(flat)
        distance = tree_distances(heads, token_mask)
        rows, cols = torch.nonzero(heads >= 0, as_tuple=True)
        edge_index = torch.stack([rows, cols, heads[rows, cols]])
        return Structure(distance=distance, adjacency=adjacency_from_edges(edge_index, token_mask), token_mask=token_mask)
