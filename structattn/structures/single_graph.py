"""Hops in one small undirected graph without the batched BFS's fixed cost (the ``provider(s)`` path).

The batched BFS (:func:`~structattn.structures.distances.graph_distances`) spends ~300 us of sparse set-up
per call, which a batch shares but one sentence does not. For a sentence-sized graph a breadth-first
search from every token over adjacency lists in Python is faster (O(n * (n + E)) simple steps): ``0`` on
the diagonal, ``-1`` between tokens of different components. Beyond :data:`MAX_TOKENS`, or for an edge
outside the sentence, :func:`single_graph_distance` returns ``None`` and the caller uses the batched path
(which also reports the error).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

#: Longer items use the batched BFS (the Python search grows as n * (n + E)).
MAX_TOKENS = 96


def single_graph_distance(n: int, edges: Iterable[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(distance int16 (n, n), adjacency bool (n, n))`` of the undirected graph, or ``None``."""
    if not 0 < n <= MAX_TOKENS:
        return None
    neighbours: list[list[int]] = [[] for _ in range(n)]
    adjacency = np.eye(n, dtype=bool)
    for i, j in edges:
        if not (0 <= i < n and 0 <= j < n) or isinstance(i, bool) or isinstance(j, bool):
            return None
        neighbours[i].append(j)
        neighbours[j].append(i)
    rows = []
    for source in range(n):
        row = [-1] * n
        row[source] = 0
        frontier, hops = [source], 0
        while frontier:
            hops += 1
            reached = []
            for u in frontier:
                for v in neighbours[u]:
                    if row[v] < 0:
                        row[v] = hops
                        reached.append(v)
            frontier = reached
        rows.append(row)
    distance = np.array(rows, dtype=np.int16)
    adjacency |= distance == 1
    return distance, adjacency
