"""Predicted distances -> a tree: minimum spanning tree, rooted to give heads; UUAS against gold heads."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree


def mst_heads(distance: np.ndarray) -> list[int]:
    """Heads (0-based, -1 for the root) of the minimum spanning tree of predicted distances.

    Only the upper triangle is read; weights are shifted to be ``>= 1`` (scipy reads 0 as "no edge"; every
    spanning tree has ``n - 1`` edges, so a constant shift keeps the optimum). The undirected tree is rooted
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
    rows, cols = np.triu_indices(n, 1)
    values = d[rows, cols]
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"mst_heads: predicted distance of pair ({rows[bad]}, {cols[bad]}) is {values[bad]}")
    cost = csr_matrix((values - values.min() + 1.0, (rows, cols)), shape=(n, n))
    tree = minimum_spanning_tree(cost)
    root = int(np.argmin(d.sum(1)))
    _, predecessors = breadth_first_order(tree, root, directed=False, return_predecessors=True)
    heads = [int(p) for p in predecessors]
    heads[root] = -1
    return heads


def undirected_edges(heads: Sequence[int]) -> set[tuple[int, int]]:
    """Head-dependent pairs as ``(min, max)``."""
    return {(min(i, h), max(i, h)) for i, h in enumerate(heads) if h >= 0}


def tree_uuas(predicted: Sequence[Sequence[int]], gold: Sequence[Sequence[int]]) -> float:
    """Corpus UUAS of predicted heads against gold heads: ``sum |pred ∩ gold| / sum |gold|`` over undirected
    edges (every word counted, punctuation included); ``nan`` without any gold edge."""
    if len(predicted) != len(gold):
        raise ValueError(f"tree_uuas: {len(predicted)} predicted trees for {len(gold)} gold trees")
    hit = sum(len(undirected_edges(p) & undirected_edges(g)) for p, g in zip(predicted, gold))
    total = sum(len(undirected_edges(g)) for g in gold)
    return hit / total if total else float("nan")
