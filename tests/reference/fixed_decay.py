"""Naive float64 oracle for ``fixed_decay``: ``s_ij = q_i . k_j / sqrt(d) - alpha * min(dist_ij, M)``, and
``- alpha * (M + 1)`` for an unreachable real pair; softmax over real keys."""

from __future__ import annotations

import torch

from tests.reference.full import attention_per_query, real_pairs


def fixed_decay_reference(alpha: float, max_distance: int, q, k, v, distance: torch.Tensor, token_mask: torch.Tensor):
    """distance ``(b, n, n)``, token_mask ``(b, n)``."""
    b, h, n, _ = q.shape
    bias = torch.zeros(b, h, n, n, dtype=torch.float64)
    for bi in range(b):
        for i in range(n):
            for j in range(n):
                dist = int(distance[bi, i, j])
                hops = max_distance + 1 if dist < 0 else min(dist, max_distance)
                bias[bi, :, i, j] = -alpha * hops
    return attention_per_query(q, k, v, real_pairs(token_mask, h), bias)
