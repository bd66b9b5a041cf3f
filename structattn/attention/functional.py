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
- :func:`per_sentence`: per-sentence loops of small ops on worker threads with single-threaded kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

HALF_TYPES = (torch.float16, torch.bfloat16)
T = TypeVar("T")
R = TypeVar("R")


def mask_value(dtype: torch.dtype) -> float:
    """The finite minimum used for disallowed scores (``-finfo(float32).max``; the dtype's own for halves)."""
    return -torch.finfo(dtype if dtype in HALF_TYPES else torch.float32).max


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmax dtype: float32 for float16/bfloat16 inputs, else the input dtype (float32 / float64)."""
    return torch.float32 if dtype in HALF_TYPES else dtype


#: Run per-sentence loops (bucketing, bias gathering, the backward tasks of :class:`BucketBiasSDPA`) on
#: ``torch.get_num_threads()`` Python threads with single-threaded torch ops (see :func:`per_sentence`).
PARALLEL_BLOCKS = True


def per_sentence(fn: Callable[[T], R], items: Iterable[T], device: torch.device) -> list[R]:
    """``[fn(x) for x in items]``; on CPU (with :data:`PARALLEL_BLOCKS`) spread over
    ``torch.get_num_threads()`` Python threads while the process-wide torch thread count is 1 (restored after).

    Loops of small tensor ops with multi-threaded kernels pay an OpenMP barrier per op, which on a busy
    machine made them 5-10x slower; single-threaded ops on worker threads (torch releases the GIL) avoid it.
    Do not run torch work in other threads of the process meanwhile. ``fn`` runs with grad mode on in the
    workers: decorate it with ``torch.no_grad()`` where needed.
    """
    items = list(items)
    threads = torch.get_num_threads()
    if not PARALLEL_BLOCKS or device.type != "cpu" or threads == 1 or len(items) < 2:
        return [fn(x) for x in items]
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(min(threads, len(items))) as pool:
            return list(pool.map(fn, items))
    finally:
        torch.set_num_threads(threads)


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
    """Fused SDPA restricted to ``allowed`` keys; a row with no allowed key outputs zeros, never NaN, whatever
    the kernel does with an empty row. (Padded query rows are zeroed by ``StructuredAttention.forward``.)

    Shapes:
        q, k, v ``(b, h, n, d)``; allowed bool broadcastable to ``(b, h, n, n)`` (e.g. ``(b, 1, 1, n)``).
    """
    keep = allowed.any(dim=-1, keepdim=True)  # (b, 1|h, 1|n, 1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed | ~keep)
    if q.device.type == "cpu" and bool(keep.all()):
        return out
    return torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))


def sdpa_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Fused SDPA with an additive float ``bias`` over the ``allowed`` keys (a finite minimum elsewhere); a row
    with no allowed key outputs zeros. Half inputs on CPU are computed in float32. Differentiable in ``bias``.

    Shapes:
        q, k, v ``(b, h, n, d)``; bias float ``(b, 1|h, n, n)``; allowed bool broadcastable to ``(b, h, n, n)``.
    """
    dtype = q.dtype
    cd = compute_dtype(dtype) if q.device.type == "cpu" else dtype
    mask = torch.where(allowed, bias.to(cd), mask_value(cd))
    keep = allowed.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(q.to(cd), k.to(cd), v.to(cd), attn_mask=mask).to(dtype)
    if q.device.type == "cpu" and bool(keep.all()):
        return out
    return torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))


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


def extend_table(table: torch.Tensor, masked: float, dtype: torch.dtype) -> torch.Tensor:
    """``[table, masked, 0]`` along the bucket axis, matching :func:`bucket_index`'s two extra codes.

    Shapes:
        table ``(K)`` or ``(h, K)``; returns ``(K + 2)`` or ``(h, K + 2)``.
    """
    extra = table.new_tensor([masked, 0.0]).expand(*table.shape[:-1], 2)
    return torch.cat([table, extra], dim=-1).to(dtype)


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
        threads = torch.get_num_threads() if PARALLEL_BLOCKS else 1
        splits = min(h, -(-threads // b))  # head ranges per sentence, so that every thread gets work
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
