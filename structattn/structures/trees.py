"""Tree helpers shared by the structural probes, tree induction and the parser-free predictor: spanning trees
of a weight matrix, undirected tree edges, corpus UUAS, the structural-probe L1 loss, word depths and the
punctuation filter.

Imports nothing that registers anything, so every layer may use it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from scipy.sparse.csgraph import minimum_spanning_tree

from structattn.structures.sentence import Sentence

Edge = tuple[int, int]  # undirected edge as (min, max)


def spanning_tree(weights: np.ndarray, maximum: bool = False) -> set[Edge]:
    """Minimum (or maximum) spanning tree of the complete graph whose edge ``{i, j}`` weighs ``weights[i, j]``.

    Only the upper triangle is read. scipy treats a zero entry as a missing edge, so the weights are
    shifted to be ``>= 1``: every spanning tree has ``n - 1`` edges, hence a constant shift keeps the optimum.

    Shapes:
        weights: (n, n). Returns ``n - 1`` edges ``(i, j)`` with ``i < j`` (none for ``n < 2``).

    Raises:
        ValueError: for a non-square matrix or non-finite weights.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"spanning_tree: expected a square (n, n) matrix, got shape {tuple(w.shape)}")
    n = w.shape[0]
    if n < 2:
        return set()
    rows, cols = np.triu_indices(n, 1)
    values = w[rows, cols]
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"spanning_tree: weight of pair ({rows[bad]}, {cols[bad]}) is {values[bad]}")
    cost = values.max() - values + 1.0 if maximum else values - values.min() + 1.0
    dense = np.zeros((n, n))
    dense[rows, cols] = cost
    tree = minimum_spanning_tree(dense).tocoo()
    return {(int(min(i, j)), int(max(i, j))) for i, j in zip(tree.row, tree.col)}


def tree_edges(heads: Sequence[int], keep: Sequence[bool] | None = None) -> set[Edge]:
    """Undirected head-dependent pairs of a tree, restricted to pairs whose both ends are kept."""
    return {
        (min(i, h), max(i, h))
        for i, h in enumerate(heads)
        if h >= 0 and (keep is None or (keep[i] and keep[h]))
    }


def uuas(predicted: Sequence[set[Edge]], gold: Sequence[set[Edge]]) -> float:
    """Corpus UUAS: ``sum |pred ∩ gold| / sum |gold|``; ``nan`` when there is no gold edge at all."""
    if len(predicted) != len(gold):
        raise ValueError(f"uuas: {len(predicted)} predicted trees for {len(gold)} gold trees")
    total = sum(len(g) for g in gold)
    if total == 0:
        return float("nan")
    return sum(len(p & g) for p, g in zip(predicted, gold)) / total


def probe_loss(predicted: torch.Tensor, gold: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Structural-probe L1 loss (Hewitt & Manning 2019, eq. 3): per sentence ``sum_{i,j} |gold - predicted| /
    n^2``, mean over sentences.

    Shapes:
        predicted (b, n, n) float, gold (b, n, n) hops, token_mask (b, n) bool -> scalar.
    """
    pairs = token_mask[:, :, None] & token_mask[:, None, :]  # (b, n, n)
    err = torch.where(pairs, (predicted - gold.to(predicted.dtype)).abs(), torch.zeros_like(predicted))
    lengths = token_mask.sum(-1).to(predicted.dtype)
    return (err.sum((-1, -2)) / lengths.pow(2)).mean()

def punctuation_keep(sentence: Sentence, exclude_punct: bool) -> list[bool]:
    """Which words are scored: all, or all but ``upos == "PUNCT"``.

    Raises:
        ValueError: when punctuation is to be excluded but the sentence has no ``upos``.
    """
    if not exclude_punct:
        return [True] * len(sentence)
    if sentence.upos is None:
        raise ValueError(
            f"sentence {sentence.id!r} has no upos, so its punctuation cannot be excluded; pass exclude_punct=False"
        )
    return [tag != "PUNCT" for tag in sentence.upos]


def tree_depths(heads: list[int]) -> list[int]:
    """Hops from every word up to the root (heads 0-based, -1 for the root)."""
    depths: list[int | None] = [None] * len(heads)
    for start in range(len(heads)):
        path, i = [], start
        while i != -1 and depths[i] is None:
            path.append(i)
            i = heads[i]
        base = -1 if i == -1 else depths[i]
        for k, j in enumerate(reversed(path), start=1):
            depths[j] = base + k
    return depths  # type: ignore[return-value]
