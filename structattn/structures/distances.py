"""Batched hop distances (placeholder engine: exact but O(n^3); replaced by the vectorised engine)."""

from __future__ import annotations

import torch

from structattn.structures._util import distance_dtype


def tree_distances(heads: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Hops in the undirected forest given by ``heads``.

    Shapes:
        heads: (b, n) long, 0-based, -1 for a root (several roots = a forest); ignored on padding.
        token_mask: (b, n) bool. Returns (b, n, n) of ``distance_dtype(n)``; -1 across trees and on padding.
    """
    b, n = heads.shape
    idx = torch.arange(b)[:, None].expand(b, n)
    tok = torch.arange(n)[None, :].expand(b, n)
    keep = token_mask & (heads >= 0)
    edge_index = torch.stack([idx[keep], tok[keep], heads[keep]])
    return graph_distances(edge_index, token_mask)


def graph_distances(edge_index: torch.Tensor, token_mask: torch.Tensor, directed: bool = False) -> torch.Tensor:
    """Shortest-path hops by batched BFS.

    Shapes:
        edge_index: (3, E) long rows (batch, source, target); token_mask (b, n) bool.
        Returns (b, n, n) of ``distance_dtype(n)``; -1 where unreachable and on padding.
    """
    b, n = token_mask.shape
    adj = torch.zeros(b, n, n, dtype=torch.float32)
    adj[edge_index[0], edge_index[1], edge_index[2]] = 1.0
    if not directed:
        adj = torch.maximum(adj, adj.transpose(1, 2))
    dist = torch.full((b, n, n), -1, dtype=torch.int32)
    eye = torch.eye(n, dtype=torch.bool).expand(b, n, n) & token_mask[:, :, None]
    reached = eye.clone()
    dist[reached] = 0
    frontier = eye.float()
    for hop in range(1, n):
        frontier = (torch.bmm(frontier, adj) > 0) & ~reached
        if not frontier.any():
            break
        dist[frontier] = hop
        reached |= frontier
        frontier = frontier.float()
    real = token_mask[:, :, None] & token_mask[:, None, :]
    dist[~real] = -1
    return dist.to(distance_dtype(n))
