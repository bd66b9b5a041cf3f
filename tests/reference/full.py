"""Naive float64 oracle for ``full`` (Vaswani et al. 2017, eq. 1), one query at a time.

``attention_per_query`` is the shared loop of the attention oracles: for each batch element, head and query
``i``, ``w_j = exp(s_j - max s) / sum exp(s - max s)`` over the allowed keys ``j`` with
``s_j = q_i . k_j / sqrt(d) + bias_ij``, and ``out_i = sum_j w_j v_j``; a query with no allowed key gets a
zero output and a zero weight row.
"""

from __future__ import annotations

import math

import torch


def attention_per_query(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shapes: q, k, v ``(b, h, n, d)``; allowed bool ``(b, h, n, n)``; bias ``(b, h, n, n)`` or None.
    Returns float64 out ``(b, h, n, d)`` and weights ``(b, h, n, n)``."""
    q, k, v = q.double(), k.double(), v.double()
    b, h, n, d = q.shape
    outs, weights = [], []
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                keys = [j for j in range(n) if bool(allowed[bi, hi, i, j])]
                row = torch.zeros(n, dtype=torch.float64)
                if not keys:
                    outs.append(torch.zeros(d, dtype=torch.float64))
                    weights.append(row)
                    continue
                scores = torch.stack([q[bi, hi, i] @ k[bi, hi, j] / math.sqrt(d) for j in keys])
                if bias is not None:
                    scores = scores + torch.stack([bias[bi, hi, i, j].double() for j in keys])
                e = torch.exp(scores - scores.max().detach())
                w = e / e.sum()
                outs.append(sum(w[t] * v[bi, hi, j] for t, j in enumerate(keys)))
                weights.append(torch.zeros(n, dtype=torch.float64).index_put((torch.tensor(keys),), w))
    return torch.stack(outs).reshape(b, h, n, d), torch.stack(weights).reshape(b, h, n, n)


def real_pairs(token_mask: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Bool ``(b, h, n, n)``: both tokens real."""
    pair = token_mask[:, :, None] & token_mask[:, None, :]
    return pair[:, None].expand(-1, num_heads, -1, -1)


def full_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, token_mask: torch.Tensor):
    """``full``: every real query attends to every real key. token_mask ``(b, n)``."""
    return attention_per_query(q, k, v, real_pairs(token_mask, q.shape[1]))
