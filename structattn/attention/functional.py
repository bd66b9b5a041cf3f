"""Shared fast-path helpers for the attention variants.

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim, K buckets. Layout ``b h n d``.

- :func:`masked_softmax` / :func:`naive_attention`: the eager path (float32 softmax, finite minimum for
  disallowed keys, max subtraction, rows with no allowed key give an all-zero row), used when weights are
  requested and as ``backend="naive"``.
- :func:`sdpa_allowed`: ``scaled_dot_product_attention`` with a boolean mask; rows with no allowed key
  yield zeros (never NaN, whatever the kernel does with an empty row).
- :func:`bucket_index` / :func:`gather_bias` / :func:`bucket_bias_attention`: attention with an additive
  per-bucket bias ``table[bucket(i, j)]`` (``soft_bias``, ``fixed_decay``). On CPU a learnable table goes
  through :class:`BucketBiasSDPA` (fused forward, chunked exact backward); see :func:`bucket_bias_attention`.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

HALF_TYPES = (torch.float16, torch.bfloat16)


def mask_value(dtype: torch.dtype) -> float:
    """The finite minimum used for disallowed scores (``-finfo(float32).max``; the dtype's own for halves)."""
    return -torch.finfo(dtype if dtype in HALF_TYPES else torch.float32).max


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmax dtype: float32 for float16/bfloat16 inputs, else the input dtype (float32 / float64)."""
    return torch.float32 if dtype in HALF_TYPES else dtype


def zero_padded_queries(x: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Zero the rows of padded queries. Shapes: x ``(b, h, n, ...)``, token_mask ``(b, n)``."""
    keep = token_mask.view(*token_mask.shape[:1], 1, token_mask.shape[1], *([1] * (x.dim() - 3)))
    return torch.where(keep, x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Softmax over keys in float32 (float64 stays float64) where ``allowed``; an empty row gives zeros.

    Shapes:
        scores ``(b, h, n, n)``; allowed bool, broadcastable to it (``None``: everything allowed).
    """
    scores = scores.to(compute_dtype(scores.dtype))
    if allowed is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~allowed, mask_value(scores.dtype))
    top = scores.amax(dim=-1, keepdim=True).detach()
    expo = torch.exp(scores - top).masked_fill(~allowed, 0.0)
    total = expo.sum(dim=-1, keepdim=True)
    return expo / total.clamp_min(torch.finfo(total.dtype).tiny)


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d) + bias) v`` over allowed keys (Vaswani et al. 2017, eq. 1), eagerly.

    Shapes:
        q, k, v ``(b, h, n, d)``; bias float broadcastable to ``(b, h, n, n)``; allowed bool, same.
        Returns out ``(b, h, n, d)`` and weights ``(b, h, n, n)``, both in the input dtype.
    """
    cd = compute_dtype(q.dtype)
    scores = torch.einsum("bhid,bhjd->bhij", q.to(cd), k.to(cd)) * q.shape[-1] ** -0.5
    if bias is not None:
        scores = scores + bias.to(cd)
    weights = masked_softmax(scores, allowed)
    out = torch.einsum("bhij,bhjd->bhid", weights, v.to(cd))
    return out.to(q.dtype), weights.to(q.dtype)


def sdpa_allowed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Fused SDPA restricted to ``allowed`` keys; a row with no allowed key outputs zeros.

    Shapes:
        q, k, v ``(b, h, n, d)``; allowed bool broadcastable to ``(b, h, n, n)`` (e.g. ``(b, 1, 1, n)``).
    """
    has_key = allowed.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed | ~has_key)
    return torch.where(has_key, out, torch.zeros((), dtype=out.dtype, device=out.device))


def bucket_index(distance: torch.Tensor, token_mask: torch.Tensor, lower_edges: Sequence[int]) -> torch.Tensor:
    """Bucket of every pair, compact (uint8 when it fits, else int32).

    Bucket ``m < len(lower_edges)`` holds distances ``lower_edges[m] <= dist < lower_edges[m + 1]`` (the last
    one is open-ended); ``K - 1`` (``K = len(lower_edges) + 1``) holds unreachable real pairs (``-1``).
    Two extra codes: ``K`` for a padded key, ``K + 1`` for a real key seen from a padded query.

    Shapes:
        distance ``(b, n, n)`` integer; token_mask ``(b, n)`` bool. Returns ``(b, n, n)``.
    """
    num_buckets = len(lower_edges) + 1
    edges = torch.tensor(list(lower_edges), dtype=distance.dtype, device=distance.device)
    index = torch.bucketize(distance, edges, right=True, out_int32=True).sub_(1)
    index.masked_fill_(distance < 0, num_buckets - 1)
    index.masked_fill_(~token_mask[:, :, None], num_buckets + 1)
    index.masked_fill_(~token_mask[:, None, :], num_buckets)
    return index.to(torch.uint8) if num_buckets + 1 <= torch.iinfo(torch.uint8).max else index


def extend_table(table: torch.Tensor, masked: float, dtype: torch.dtype) -> torch.Tensor:
    """``[table, masked, 0]`` along the bucket axis, matching :func:`bucket_index`'s two extra codes.

    Shapes:
        table ``(K)`` or ``(h, K)``; returns ``(K + 2)`` or ``(h, K + 2)``.
    """
    extra = table.new_tensor([masked, 0.0]).expand(*table.shape[:-1], 2)
    return torch.cat([table, extra], dim=-1).to(dtype)


def gather_bias(ext: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``ext[..., index]`` as an additive score bias. Shapes: ext ``(K + 2)`` or ``(h, K + 2)``; index
    ``(b, n, n)``; returns ``(b, 1, n, n)`` (shared table) or ``(b, h, n, n)`` (per-head table)."""
    ids = index.to(device=ext.device, dtype=torch.int32)
    if ext.dim() == 1:
        return ext[ids].unsqueeze(1)
    return ext[:, ids].transpose(0, 1)


_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)

#: Elements of one (heads x query rows x keys) block in :class:`BucketBiasSDPA`'s backward (4 MiB in float32).
CHUNK_ELEMENTS = 1 << 20


class BucketBiasSDPA(torch.autograd.Function):
    """``softmax(q k^T / sqrt(d) + ext[index]) v`` with the gradient of the bucket table, on CPU.

    Forward: the fused CPU flash kernel with the (detached) float bias; saves ``out`` and its logsumexp, not
    the ``(b, h, n, n)`` probabilities. Backward, in blocks of at most :data:`CHUNK_ELEMENTS` scores (a batch
    element, a group of heads, a range of query rows): recompute ``P = exp(S - lse)`` and ``dP = dO V^T``,
    then ``dS = P * (dP - rowsum(dO * O))``, ``dq = dS K / sqrt(d)``, ``dk = dS^T Q / sqrt(d)``, ``dv = P^T dO``
    and ``d_ext[m] = sum of dS over the pairs in bucket m`` (``bincount``; ``scatter_add`` per head).

    Args (of ``apply``): q, k, v ``(b, h, n, d)`` float32/float64; ext ``(K + 2)`` or ``(h, K + 2)`` from
    :func:`extend_table` (its gradient is returned for the whole extended table); index ``(b, n, n)`` from
    :func:`bucket_index`.
    """

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ext: torch.Tensor, index: torch.Tensor):
        bias = gather_bias(ext.detach(), index)
        out, lse = _FLASH_CPU(q, k, v, attn_mask=bias)
        ctx.save_for_backward(q, k, v, out, lse, ext.detach(), index)
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        q, k, v, out, lse, ext, index = ctx.saved_tensors
        return (*_bucket_bias_backward(grad_out.contiguous(), q, k, v, out, lse, ext, index), None)


def _chunk_shape(h: int, n: int) -> tuple[int, int]:
    """(heads, query rows) per backward block so that heads * rows * n <= CHUNK_ELEMENTS (at least 1 x 1)."""
    if n * n <= CHUNK_ELEMENTS:
        return max(1, min(h, CHUNK_ELEMENTS // (n * n))), n
    return 1, max(1, CHUNK_ELEMENTS // n)


def _bucket_bias_backward(grad_out, q, k, v, out, lse, ext, index):
    b, h, n, d = q.shape
    scale = d**-0.5
    per_head = ext.dim() == 2
    neg_delta = (grad_out * out).sum(-1, keepdim=True).neg_()  # (b, h, n, 1): -rowsum(dO * O)
    dq, dk, dv = (torch.zeros(b, h, n, d, dtype=q.dtype) for _ in range(3))
    d_ext = torch.zeros_like(ext)
    heads, rows = _chunk_shape(h, n)
    k_t, v_t = k.transpose(-1, -2), v.transpose(-1, -2)
    for bi in range(b):
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            ids = index[bi, r0:r1].to(torch.int32)  # (r, n)
            shared = None if per_head else ext[ids].unsqueeze(0)  # (1, r, n)
            head_sum = None if per_head else torch.zeros(r1 - r0, n, dtype=q.dtype)
            for h0 in range(0, h, heads):
                h1 = min(h, h0 + heads)
                qc, goc = q[bi, h0:h1, r0:r1], grad_out[bi, h0:h1, r0:r1]
                bias = ext[h0:h1][:, ids] if per_head else shared
                p = torch.baddbmm(bias, qc, k_t[bi, h0:h1], alpha=scale)  # scores (g, r, n)
                p.sub_(lse[bi, h0:h1, r0:r1, None]).exp_()  # probabilities
                ds = torch.baddbmm(neg_delta[bi, h0:h1, r0:r1], goc, v_t[bi, h0:h1]).mul_(p)
                if per_head:
                    flat = ids.reshape(1, -1).long().expand(h1 - h0, -1)
                    d_ext[h0:h1].scatter_add_(1, flat, ds.reshape(h1 - h0, -1))
                else:
                    head_sum += ds.sum(0)
                dq[bi, h0:h1, r0:r1].baddbmm_(ds, k[bi, h0:h1], alpha=scale)
                dk[bi, h0:h1].baddbmm_(ds.transpose(1, 2), qc, alpha=scale)
                dv[bi, h0:h1].baddbmm_(p.transpose(1, 2), goc)
            if not per_head:
                d_ext += torch.bincount(ids.view(-1), weights=head_sum.view(-1), minlength=ext.shape[-1])
    return dq, dk, dv, d_ext


def bucket_bias_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    table: torch.Tensor,
    index: torch.Tensor,
    backend: str = "sdpa",
) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + table[index]) v`` with padded keys masked (fused paths).

    ``backend="sdpa"``: a table that needs a gradient goes through :class:`BucketBiasSDPA` on CPU, through SDPA
    with a float mask on other devices (CUDA's memory-efficient kernel returns the bias gradient); a table
    without gradient is a plain SDPA float mask. Half inputs are computed in float32 on CPU. ``backend="flex"``:
    :func:`flex_bucket_bias`. Padded query rows are not zeroed here (see :func:`zero_padded_queries`).

    Shapes:
        q, k, v ``(b, h, n, d)``; table ``(K)`` or ``(h, K)``; index ``(b, n, n)`` from :func:`bucket_index`.
    """
    if backend == "flex":
        return flex_bucket_bias(q, k, v, table, index)
    if backend != "sdpa":
        raise ValueError(f"bucket_bias_attention: backend must be 'sdpa' or 'flex', got {backend!r}")
    dtype = q.dtype
    if q.device.type == "cpu":
        cd = compute_dtype(dtype)
        q, k, v = q.to(cd), k.to(cd), v.to(cd)
    ext = extend_table(table, mask_value(q.dtype), q.dtype)
    if q.device.type == "cpu" and _FLASH_CPU is not None and torch.is_grad_enabled() and ext.requires_grad:
        out = BucketBiasSDPA.apply(q, k, v, ext, index)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=gather_bias(ext, index))
    return out.to(dtype)


_FLEX = None


def _compiled_flex():
    global _FLEX
    if _FLEX is None:
        from torch.nn.attention.flex_attention import flex_attention

        _FLEX = torch.compile(flex_attention)
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
