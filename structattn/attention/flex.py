"""Compiled FlexAttention helpers (CUDA training, CPU inference): bucket-table and dense biases.

Compiled with static shapes (``dynamic=False``, one graph per length), as ``local_global`` does: the
dynamic-shape graph failed to compile for CPU at the second distinct sequence length.
"""

from __future__ import annotations

import torch

from structattn.attention.masking import mask_value


def extend_table(table: torch.Tensor, masked: float, dtype: torch.dtype) -> torch.Tensor:
    """``[table, masked, 0]`` along the bucket axis, matching ``bucket_bias.bucket_index``'s two extra codes.

    Shapes:
        table ``(K)`` or ``(h, K)``; returns ``(K + 2)`` or ``(h, K + 2)``.
    """
    extra = table.new_tensor([masked, 0.0]).expand(*table.shape[:-1], 2)
    return torch.cat([table, extra], dim=-1).to(dtype)


_FLEX = None


def _compiled_flex():
    global _FLEX
    if _FLEX is None:
        from torch.nn.attention.flex_attention import flex_attention

        # static shapes (one graph per length), as local_global does: the dynamic-shape graph failed to
        # compile for CPU at the second distinct length (Inductor C++ error)
        _FLEX = torch.compile(flex_attention, dynamic=False)
    return _FLEX


def flex_bucket_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, index: torch.Tensor):
    """FlexAttention with ``score_mod = score + ext[index[b, i, j]]`` (compiled; CUDA training, CPU forward).

    Raises:
        ValueError: on CPU when a gradient is needed (FlexAttention has no CPU backward; use ``"sdpa"``).
    """
    if q.device.type == "cpu" and torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, table)):
        raise ValueError(
            "backend 'flex' has no CPU backward (FlexAttention trains only on CUDA); use backend='sdpa' for CPU "
            "training or run under torch.no_grad()"
        )
    ext = extend_table(table, mask_value(torch.float32), torch.float32)
    ids = index.to(device=q.device, dtype=torch.long)
    if ext.dim() == 1:

        def score_mod(score, b, h, i, j):
            return score + ext[ids[b, i, j]]

    else:

        def score_mod(score, b, h, i, j):
            return score + ext[h, ids[b, i, j]]

    return _compiled_flex()(q, k, v, score_mod=score_mod)

def flex_dense_bias(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, allowed: torch.Tensor
) -> torch.Tensor:
    """FlexAttention with ``score_mod = score + bias[b, h, i, j]`` on allowed pairs, ``-inf`` elsewhere (compiled;
    CUDA training, CPU forward); a row with no allowed key outputs zeros.

    Shapes:
        q, k, v ``(b, h, n, d)``; bias ``(b, 1|h, n, n)`` or None; allowed bool broadcastable to ``(b, h, n, n)``.
    """
    if q.device.type == "cpu" and torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (q, k, v, bias)
    ):
        raise ValueError(
            "backend 'flex' has no CPU backward (FlexAttention trains only on CUDA); use backend='sdpa' for CPU "
            "training or run under torch.no_grad()"
        )
    b, h, n, _ = q.shape
    per_head = allowed.shape[1] != 1 or (bias is not None and bias.shape[1] != 1)
    heads = h if per_head else 1
    gate = allowed.expand(b, heads, n, n).contiguous()
    add = torch.zeros((), device=q.device) if bias is None else bias.float().expand(b, heads, n, n).contiguous()

    def score_mod(score, bi, hi, i, j):
        hh = hi if per_head else 0
        shifted = score if bias is None else score + add[bi, hh, i, j]
        return torch.where(gate[bi, hh, i, j], shifted, -float("inf"))

    out = _compiled_flex()(q, k, v, score_mod=score_mod)
    keep = allowed.any(dim=-1, keepdim=True)
    return torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))
