"""Predicted distances -> a tree: minimum spanning tree, rooted to give heads; UUAS against gold heads."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from structattn.structures.trees import spanning_tree, tree_edges, uuas


def mst_heads(distance: np.ndarray) -> list[int]:
    """Heads (0-based, -1 for the root) of the minimum spanning tree of predicted distances.

    The tree is :func:`~structattn.structures.trees.spanning_tree` of the distances (upper triangle), rooted
    at the word with the smallest summed predicted distance (its centre); the root only orients the edges,
    every tree distance is the same whatever the root.

    Shapes:
        distance: (n, n). Returns n heads.

    Raises:
        ValueError: for a non-square matrix or a non-finite distance.
    """
    d = np.asarray(distance, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] < 1:
        raise ValueError(f"mst_heads: expected a square (n, n) matrix with n >= 1, got shape {tuple(d.shape)}")
    n = d.shape[0]
    if n == 1:
        return [-1]
    rows, cols = zip(*spanning_tree(d))
    tree = csr_matrix((np.ones(n - 1), (rows, cols)), shape=(n, n))
    root = int(np.argmin(d.sum(1)))
    _, predecessors = breadth_first_order(tree, root, directed=False, return_predecessors=True)
    heads = [int(p) for p in predecessors]
    heads[root] = -1
    return heads


def undirected_edges(heads: Sequence[int]) -> set[tuple[int, int]]:
    """Head-dependent pairs as ``(min, max)``."""
    return tree_edges(heads)


def tree_uuas(predicted: Sequence[Sequence[int]], gold: Sequence[Sequence[int]]) -> float:
    """Corpus UUAS of predicted heads against gold heads: ``sum |pred ∩ gold| / sum |gold|`` over undirected
    edges (every word counted, punctuation included); ``nan`` without any gold edge."""
    if len(predicted) != len(gold):
        raise ValueError(f"tree_uuas: {len(predicted)} predicted trees for {len(gold)} gold trees")
    return uuas([tree_edges(p) for p in predicted], [tree_edges(g) for g in gold])
