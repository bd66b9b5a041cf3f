"""Naive float64 oracle for ``local_global`` (Longformer, Beltagy et al. 2020, sections 3.1-3.2).

Written from the paper, one query at a time, sharing no code with ``structattn.attention``:

* a local token ``i`` attends to the tokens of its (dilated) sliding window, ``|i - j| <= r * dil`` with
  ``|i - j|`` a multiple of ``dil``, and to every global token;
* a global token attends to every token (and every token attends to it);
* padding is never attended and padded queries output zeros.

``alpha_ij = softmax_j(q_i . k_j / sqrt(d))`` over that allowed set, ``out_i = sum_j alpha_ij v_j``.
"""

from __future__ import annotations

import math

import torch


def allowed_keys(i: int, length: int, radius: int, dilation: int, is_global: list[bool]) -> list[int]:
    """Keys query ``i`` of a sentence of ``length`` real tokens may attend to, in increasing order."""
    if is_global[i]:
        return list(range(length))
    out = []
    for j in range(length):
        offset = abs(i - j)
        in_window = offset <= radius * dilation and offset % dilation == 0
        if in_window or is_global[j]:
            out.append(j)
    return out


def local_global_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    token_mask: torch.Tensor,
    radius: int,
    dilation: int,
    is_global: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Longformer attention in float64 with per-query loops.

    Shapes:
        q, k, v: (b, h, n, d); token_mask, is_global: (b, n) bool (padding at the end of each row).
        Returns out (b, h, n, d) and weights (b, h, n, n), both float64.
    """
    q, k, v = q.double(), k.double(), v.double()
    b, h, n, d = q.shape
    scale = 1.0 / math.sqrt(d)
    out_rows, weight_rows = [], []
    for bi in range(b):
        length = int(token_mask[bi].sum())
        flags = [bool(is_global[bi, j]) if is_global is not None else False for j in range(n)]
        for hi in range(h):
            for i in range(n):
                weights = q.new_zeros(n)
                if i < length:
                    keys = torch.tensor(allowed_keys(i, length, radius, dilation, flags))
                    scores = (k[bi, hi, keys] @ q[bi, hi, i]) * scale
                    alpha = torch.exp(scores - scores.max())
                    weights = weights.index_put((keys,), alpha / alpha.sum())
                weight_rows.append(weights)
                out_rows.append(weights @ v[bi, hi])
    out = torch.stack(out_rows).reshape(b, h, n, d)
    weights = torch.stack(weight_rows).reshape(b, h, n, n)
    return out, weights
