"""Attention with an additive per-bucket bias ``table[bucket(i, j)]`` (``soft_bias``, ``fixed_decay``).

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim, K buckets.

:func:`bucket_index` codes every pair, :func:`extend_table` / :func:`gather_bias` turn a table into a bias,
:func:`bucket_bias_attention` runs it (on CPU a learnable table goes through :class:`BucketBiasSDPA`: fused
forward, chunked exact backward), :func:`table_bias_attention` adds the eager path with the weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from structattn.attention import threads
from structattn.attention.flex import extend_table, flex_bucket_bias
from structattn.attention.masking import compute_dtype, mask_value, naive_attention
from structattn.attention.threads import per_sentence

__all__ = [
    "BucketBiasSDPA", "bucket_bias_attention", "bucket_index", "extend_table", "gather_bias", "table_bias_attention",
]


def bucket_index(distance: torch.Tensor, token_mask: torch.Tensor, lower_edges: Sequence[int]) -> torch.Tensor:
    """Bucket of every pair, compact (uint8 when it fits, else int32).

    Bucket ``m < len(lower_edges)`` holds distances ``lower_edges[m] <= dist < lower_edges[m + 1]`` (the last
    one is open-ended); ``K - 1`` (``K = len(lower_edges) + 1``) holds unreachable real pairs (``-1``).
    Two extra codes: ``K`` for a padded key, ``K + 1`` for a real key seen from a padded query. Computed
    sentence by sentence through a lookup table over ``-1 .. lower_edges[-1]`` (distances are clamped there).

    Shapes:
        distance ``(b, n, n)`` integer; token_mask ``(b, n)`` bool. Returns ``(b, n, n)``.
    """
    num_buckets, top = len(lower_edges) + 1, int(lower_edges[-1])
    dtype = torch.uint8 if num_buckets + 1 <= torch.iinfo(torch.uint8).max else torch.int32
    hops = torch.arange(-1, top + 1)
    lut = torch.bucketize(hops, torch.tensor(list(lower_edges)), right=True) - 1  # lut[d + 1] = bucket(d)
    lut[0] = num_buckets - 1
    lut = lut.to(device=distance.device, dtype=dtype)
    index = torch.empty(distance.shape, dtype=dtype, device=distance.device)

    @torch.no_grad()
    def fill(bi: int) -> None:
        offset = distance[bi].clamp(-1, top).add_(1).reshape(-1).long()
        torch.index_select(lut, 0, offset, out=index[bi].view(-1))

    per_sentence(fill, range(distance.shape[0]), distance.device)
    if distance.device.type != "cpu" or not bool(token_mask.all()):
        index.masked_fill_(~token_mask[:, :, None], num_buckets + 1)
        index.masked_fill_(~token_mask[:, None, :], num_buckets)
    return index


def gather_bias(ext: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``ext[..., index]`` as an additive score bias (differentiable in ``ext``; without a gradient it is
    filled sentence by sentence, so no ``(b, n, n)`` int64 index is ever built).

    Shapes:
        ext ``(K + 2)`` or ``(h, K + 2)``; index ``(b, n, n)``; returns ``(b, 1, n, n)`` (shared table) or
        ``(b, h, n, n)`` (per-head table).
    """
    b, n, m = index.shape
    index = index.to(ext.device)
    if ext.requires_grad and torch.is_grad_enabled():
        flat = index.reshape(-1).long()
        if ext.dim() == 1:
            return ext.index_select(0, flat).view(b, 1, n, m)
        return ext.index_select(1, flat).view(-1, b, n, m).transpose(0, 1)
    bias = torch.empty(b, ext.shape[0] if ext.dim() == 2 else 1, n * m, dtype=ext.dtype, device=ext.device)
    rows = ext.detach().view(-1, ext.shape[-1])

    @torch.no_grad()
    def fill(bi: int) -> None:
        flat = index[bi].reshape(-1).long()
        for hi in range(rows.shape[0]):  # a 1-D index_select per head (along dim 1 it is several times slower)
            torch.index_select(rows[hi], 0, flat, out=bias[bi, hi])

    per_sentence(fill, range(b), ext.device)
    return bias.view(b, -1, n, m)


_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)

#: Scores per backward block of :class:`BucketBiasSDPA` (one block per worker at a time; 2 MiB in float32).
CHUNK_ELEMENTS = 1 << 19
#: Bias elements materialised at once per worker by :class:`BucketBiasSDPA`'s forward (1 MiB in float32).
FORWARD_BIAS_ELEMENTS = 1 << 18
class BucketBiasSDPA(torch.autograd.Function):
    """``softmax(q k^T / sqrt(d) + ext[index]) v`` with the gradient of the bucket table, on CPU.

    Forward: the fused CPU flash kernel with the (detached) float bias; saves ``out`` and its logsumexp, not
    the ``(b, h, n, n)`` probabilities; padded query rows are zeroed in place. Backward, per sentence and
    head range (one task each), in blocks of at most :data:`CHUNK_ELEMENTS` scores: recompute
    ``P = exp(S - lse)`` and ``dP = dO V^T`` (``-lse`` and ``-rowsum(dO * O)`` ride along as an extra column
    of the two matmuls), then ``dS = P * (dP - rowsum(dO * O))``, ``dq = dS K / sqrt(d)``,
    ``dk = dS^T Q / sqrt(d)``, ``dv = P^T dO`` and ``d_ext[m] = sum of dS over the pairs in bucket m``
    (``scatter_add``). Extra memory: the bias in the forward, a few blocks per thread in the backward.

    The tasks run through :func:`per_sentence` (worker threads, single-threaded ops).

    Args (of ``apply``): q, k, v ``(b, h, n, d)`` float32/float64; ext ``(K + 2)`` or ``(h, K + 2)`` from
    :func:`extend_table` (its gradient is returned for the whole extended table); index ``(b, n, n)`` from
    :func:`bucket_index`; token_mask ``(b, n)``.
    """

    @staticmethod
    def forward(ctx, q, k, v, ext, index, token_mask):
        out, lse = _flash_with_bias(q, k, v, ext.detach(), index)
        if not bool(token_mask.all()):
            out.masked_fill_(~token_mask[:, None, :, None], 0.0)
        ctx.save_for_backward(q, k, v, out, lse, ext.detach(), index, token_mask)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        q, k, v, out, lse, ext, index, token_mask = ctx.saved_tensors
        b, h, n, d = q.shape
        neg_delta = (grad_out * out).sum(-1, keepdim=True).neg_()  # (b, h, n, 1): -rowsum(dO * O)
        grads = tuple(torch.empty(b, h, n, d, dtype=q.dtype) for _ in range(3))  # dq, dk, dv
        workers = torch.get_num_threads() if threads.PARALLEL_BLOCKS else 1
        splits = min(h, -(-workers // b))  # head ranges per sentence, so that every thread gets work
        tasks = [(bi, h * s // splits, h * (s + 1) // splits) for bi in range(b) for s in range(splits)]
        saved = (grad_out, q, k, v, lse, neg_delta, ext, index, token_mask, grads)
        parts = per_sentence(lambda task: _backward_task(task, *saved), tasks, q.device)
        return (*grads, torch.stack(parts).sum(0), None, None)


def _flash_with_bias(q, k, v, ext, index) -> tuple[torch.Tensor, torch.Tensor]:
    """CPU flash attention with the bias ``ext[index]`` built for a few sentences at a time (never a large
    ``(b, h, n, n)``: at most :data:`FORWARD_BIAS_ELEMENTS` per worker), groups on :func:`per_sentence` threads.

    Returns out ``(b, h, n, d)`` and its logsumexp ``(b, h, n)``.
    """
    b, h, n, _ = q.shape
    group = max(1, FORWARD_BIAS_ELEMENTS // (n * n * (h if ext.dim() == 2 else 1)))
    if group >= b:
        return _FLASH_CPU(q, k, v, attn_mask=gather_bias(ext, index))
    out, lse = torch.empty_like(q), torch.empty(b, h, n, dtype=q.dtype)

    @torch.no_grad()
    def run(b0: int) -> None:
        part = slice(b0, min(b, b0 + group))
        out[part], lse[part] = _FLASH_CPU(q[part], k[part], v[part], attn_mask=gather_bias(ext, index[part]))

    per_sentence(run, range(0, b, group), q.device)
    return out, lse


def _block_shape(h: int, n: int) -> tuple[int, int]:
    """(heads, query rows) per backward block so that heads * rows * n <= CHUNK_ELEMENTS (at least 1 x 1)."""
    if n * n <= CHUNK_ELEMENTS:
        return max(1, min(h, CHUNK_ELEMENTS // (n * n))), n
    return 1, max(1, CHUNK_ELEMENTS // n)


@torch.no_grad()  # worker threads start with grad mode on; the backward itself is not differentiable
def _backward_task(task, grad_out, q, k, v, lse, neg_delta, ext, index, token_mask, grads) -> torch.Tensor:
    """Gradients of sentence ``bi``, heads ``h0:h1`` (written into ``grads``); returns its ``d_ext``."""
    (bi, h0, h1), (dq, dk, dv) = task, grads
    n, d = q.shape[-2:]
    heads, rows = _block_shape(h1 - h0, n)
    scale, per_head = d**-0.5, ext.dim() == 2
    d_ext = torch.zeros_like(ext)
    ones = torch.ones(h1 - h0, n, 1, dtype=q.dtype)
    k_aug = torch.cat([k[bi, h0:h1], ones], -1).transpose(1, 2)  # (g, d + 1, n): [k, 1]
    v_aug = torch.cat([v[bi, h0:h1], ones], -1).transpose(1, 2)  # (g, d + 1, n): [v, 1]
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        ids = index[bi, r0:r1].reshape(-1).long()  # (r * n)
        shared = None if per_head else ext.index_select(0, ids).view(1, r1 - r0, n)
        padded = ~token_mask[bi, r0:r1, None]
        padded = padded if bool(padded.any()) else None
        for g0 in range(h0, h1, heads):
            g1 = min(h1, g0 + heads)
            qc, goc = q[bi, g0:g1, r0:r1], grad_out[bi, g0:g1, r0:r1]
            if padded is not None:
                goc = goc.masked_fill(padded, 0.0)  # the output rows of padded queries are constant zeros
            if per_head:
                bias = torch.stack([ext[hi].index_select(0, ids) for hi in range(g0, g1)]).view(g1 - g0, r1 - r0, n)
            else:
                bias = shared
            q_aug = torch.cat([qc * scale, -lse[bi, g0:g1, r0:r1, None]], -1)  # [q / sqrt(d), -lse]
            p = torch.baddbmm(bias, q_aug, k_aug[g0 - h0:g1 - h0]).exp_()  # P = exp(S - lse)
            dp_aug = torch.cat([goc, neg_delta[bi, g0:g1, r0:r1]], -1)  # [dO, -rowsum(dO * O)]
            ds = torch.bmm(dp_aug, v_aug[g0 - h0:g1 - h0]).mul_(p)  # dS = P * (dP - rowsum(dO * O))
            if per_head:
                for j, hi in enumerate(range(g0, g1)):
                    d_ext[hi].scatter_add_(0, ids, ds[j].view(-1))
            else:
                d_ext.scatter_add_(0, ids, ds.sum(0).view(-1))
            beta = 0.0 if r0 == 0 else 1.0
            dq[bi, g0:g1, r0:r1].baddbmm_(ds, k[bi, g0:g1], beta=0.0, alpha=scale)
            dk[bi, g0:g1].baddbmm_(ds.transpose(1, 2), qc, beta=beta, alpha=scale)
            dv[bi, g0:g1].baddbmm_(p.transpose(1, 2), goc, beta=beta)
    return d_ext


def bucket_bias_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    table: torch.Tensor,
    index: torch.Tensor,
    token_mask: torch.Tensor,
    backend: str = "sdpa",
) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + table[index]) v`` over real keys. Padded query rows are not zeroed here
    (``StructuredAttention.forward`` does it once), except inside :class:`BucketBiasSDPA`, whose backward relies on it.

    ``backend="sdpa"``: a table that needs a gradient goes through :class:`BucketBiasSDPA` on CPU, through SDPA
    with a float mask on other devices (CUDA's memory-efficient kernel returns the bias gradient); a table
    without gradient is a plain SDPA float mask. Half inputs are computed in float32 on CPU (the output is
    cast back). ``backend="flex"``: :func:`flex_bucket_bias`.

    Shapes:
        q, k, v ``(b, h, n, d)``; table ``(K)`` or ``(h, K)``; index ``(b, n, n)`` from :func:`bucket_index`;
        token_mask ``(b, n)``.
    """
    if backend not in ("sdpa", "flex"):
        raise ValueError(f"bucket_bias_attention: backend must be 'sdpa' or 'flex', got {backend!r}")
    dtype = q.dtype
    if backend == "flex":
        return flex_bucket_bias(q, k, v, table, index)
    if q.device.type == "cpu":
        cd = compute_dtype(dtype)
        q, k, v = q.to(cd), k.to(cd), v.to(cd)
    ext = extend_table(table, mask_value(q.dtype), q.dtype)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, ext))
    if q.device.type == "cpu" and _FLASH_CPU is not None:
        if needs_grad and ext.requires_grad:
            return BucketBiasSDPA.apply(q, k, v, ext, index, token_mask).to(dtype)
        if not needs_grad:  # inference: the fused kernel with the bias of a few sentences at a time
            return _flash_with_bias(q, k, v, ext, index)[0].to(dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=gather_bias(ext, index)).to(dtype)

def table_bias_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    table: torch.Tensor,
    index: torch.Tensor,
    token_mask: torch.Tensor,
    backend: str,
    return_weights: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Bucketed-bias attention with the weights when asked for (or ``backend == "naive"``): the naive path
    then, :func:`bucket_bias_attention` otherwise. Returns ``(out, weights or None)``."""
    if return_weights or backend == "naive":
        bias = gather_bias(extend_table(table, 0.0, compute_dtype(q.dtype)), index)
        allowed = (token_mask[:, :, None] & token_mask[:, None, :])[:, None]
        out, weights = naive_attention(q, k, v, bias=bias, allowed=allowed)
        return out, weights if return_weights else None
    return bucket_bias_attention(q, k, v, table, index, token_mask, backend), None
