"""Tree distances of one short sentence without the batched engine's fixed cost (the ``provider(s)`` path).

The batched engine (:func:`~structattn.structures.distances.tree_distances`) pays ~100 us of vectorised
set-up per call, which a batch of 64 shares but a single sentence does not. Here the ancestor bitsets are
built by one memoised walk up the heads in Python (``anc[u] = bit(u) | anc[head(u)]``, O(n) integer ops),
and ``dist(u, v) = popcount(anc[u] XOR anc[v])`` is one numpy broadcast, as in the engine's bitset path;
tokens of different trees of a forest are ``-1``. Only for n <= 64 (one 64-bit word per token) and numpy
with ``bitwise_count``; otherwise, and for heads that are not a valid forest, :func:`single_tree_distance`
returns ``None`` and the caller uses the batched engine, which also reports the error.
"""

from __future__ import annotations

import numpy as np
import torch

from structattn.structures.distances import BITSET_MAX_TOKENS


def single_tree_distance(heads: list[int]) -> np.ndarray | None:
    """``(n, n)`` int16 hops of the forest ``heads`` (0-based, -1 roots), or ``None`` (see module docstring)."""
    n = len(heads)
    if not 0 < n <= BITSET_MAX_TOKENS or min(heads) < -1 or max(heads) >= n:
        return None
    anc = [0] * n
    steps = n  # a forest is climbed in n steps in all; more means a cycle
    for start in range(n):
        if anc[start]:
            continue
        path, j = [], start
        while j != -1 and not anc[j]:
            path.append(j)
            j = heads[j]
            steps -= 1
            if steps < 0:
                return None
        bits = 0 if j == -1 else anc[j]
        for t in reversed(path):
            bits |= 1 << t
            anc[t] = bits
    words = np.array(anc, dtype=np.uint64)
    out = np.empty((n, n), dtype=np.int16)
    np.bitwise_count(words[:, None] ^ words[None, :], out=out)
    if heads.count(-1) > 1:
        roots = [r for r, h in enumerate(heads) if h == -1]
        tree = words & np.uint64(sum(1 << r for r in roots))  # each token's root bit
        out[tree[:, None] != tree[None, :]] = -1
    return out


def tree_adjacency(distance: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Adjacency of a tree (or forest) from its distances: in a tree the head-dependent pairs are exactly
    the pairs 1 hop apart, so ``0 <= distance <= 1`` gives them with self-loops, ``False`` across trees and
    on padding. One comparison: ``-1`` read as unsigned is the largest value.

    Shapes:
        ``(n, n)`` or ``(b, n, n)`` integer -> bool, same shape.
    """
    d = distance if isinstance(distance, np.ndarray) else distance.contiguous().numpy()
    return torch.from_numpy(d.view(f"u{d.dtype.itemsize}") <= 1)
