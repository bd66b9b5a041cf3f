"""Naive float64 oracle for ``soft_bias``: ``s_ij = q_i . k_j / sqrt(d) + scale * table[bucket(dist_ij)]``
(structural / syntax-guided score bias), softmax over real keys, written pair by pair."""

from __future__ import annotations

import torch

from tests.reference.full import attention_per_query, real_pairs


def reference_bucket(dist: int, max_distance: int, log_from: int | None, num_log: int | None) -> int:
    """Bucket of one distance: exact below ``log_from`` (or ``max_distance``), log-spaced starts
    ``round(T * (M / T) ** (m / L))`` in between, ``>= max_distance`` next, unreachable (-1) last."""
    if log_from is None:
        last_distance_bucket = max_distance
        if dist < 0:
            return last_distance_bucket + 1
        return min(dist, max_distance)
    last_distance_bucket = log_from + num_log
    if dist < 0:
        return last_distance_bucket + 1
    if dist < log_from:
        return dist
    if dist >= max_distance:
        return last_distance_bucket
    starts = [round(log_from * (max_distance / log_from) ** (m / num_log)) for m in range(num_log)]
    return log_from + max(m for m in range(num_log) if starts[m] <= dist)


def soft_bias_reference(module, q, k, v, distance: torch.Tensor, token_mask: torch.Tensor):
    """Reads ``module.table`` (``(K)`` or ``(h, K)``), ``module.scale`` and the bucket options.
    distance ``(b, n, n)``, token_mask ``(b, n)``."""
    b, h, n, _ = q.shape
    table = module.table.double()
    scale = 1.0 if module.scale is None else module.scale.double()
    zero = torch.zeros((), dtype=torch.float64)
    rows = []
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                for j in range(n):
                    if not (token_mask[bi, i] and token_mask[bi, j]):
                        rows.append(zero)
                        continue
                    dist = int(distance[bi, i, j])
                    m = reference_bucket(dist, module.max_distance, module.log_buckets_from, module.num_log_buckets)
                    rows.append(scale * (table[hi, m] if table.dim() == 2 else table[m]))
    bias = torch.stack(rows).reshape(b, h, n, n)
    return attention_per_query(q, k, v, real_pairs(token_mask, h), bias)
