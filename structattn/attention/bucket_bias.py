"""Attention with an additive per-bucket bias ``table[bucket(i, j)]`` (``soft_bias``, ``fixed_decay``).

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim, K buckets.

:func:`bucket_index` codes every pair, :func:`extend_table` / :func:`gather_bias` turn a table into a bias,
:func:`bucket_bias_attention` runs it (on CPU a learnable table goes through :class:`BucketBiasSDPA`: fused
forward, chunked exact backward), :func:`table_bias_attention` adds the eager path with the weights.
"""

from __future__ import annotations

import math
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
        hops = distance[bi]
        if hops.dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):  # clamp a fresh int32 copy in place
            hops = hops.to(torch.int32, copy=True).clamp_(-1, top)
        else:  # int64 / float: clamp before narrowing
            hops = hops.clamp(-1, top).int()
        torch.index_select(lut, 0, hops.add_(1).reshape(-1), out=index[bi].view(-1))  # int32 ids: 4x faster than int64

    _for_sentences(fill, range(distance.shape[0]), distance.shape[-1] ** 2, distance.device)
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
    if rows.shape[0] == 1 and not _on_workers(b, n * m, ext.device):  # one gather: 106 -> 65 us at b 8, n 128
        _gather_rows(rows, index.reshape(-1), bias.view(1, -1))
    else:
        _for_sentences(lambda bi: _gather_rows(rows, index[bi].reshape(-1), bias[bi]), range(b), n * m, ext.device)
    return bias.view(b, -1, n, m)


#: Sentences with fewer pairs (``n * n``) than this run their per-sentence loops in the calling thread (torch's
#: own threads), not on :func:`per_sentence` workers: at 2 threads, n <= 256, the pool costs more than it gains
#: (fwd+bwd at n = 128: 16.5 -> 11.5 ms; SDPA 6.7 ms).
PARALLEL_PAIRS = 1 << 17
#: Fewer tasks than this many per thread also run in the calling thread: with one or two tasks per worker the
#: workers slow each other down (at 2 threads, b = 2, n = 512 each backward task took 25-30 ms beside the
#: other against ~20 ms alone), and torch's own threads do better (fwd+bwd 2.08x -> 1.61x SDPA); from b = 8
#: the pool wins (b = 8, n = 512: 1.60x vs 1.92x), and so it does for sentences of :data:`LARGE_PAIRS` pairs or more
#: whatever their number (b = 1, n = 1024, two head-range tasks: 1.79-1.85x on the pool, 1.91-2.01x without).
POOL_TASKS_PER_THREAD = 2
LARGE_PAIRS = 1 << 20


def _for_sentences(fn, items, pairs: int, device: torch.device) -> list:
    """:func:`per_sentence` for sentences of at least :data:`PARALLEL_PAIRS` pairs, given at least
    :data:`POOL_TASKS_PER_THREAD` tasks per thread or sentences of :data:`LARGE_PAIRS` pairs; a plain loop
    otherwise (torch's own threads)."""
    items = list(items)
    if not _on_workers(len(items), pairs, device):
        return [fn(x) for x in items]
    return per_sentence(fn, items, device)


def _on_workers(tasks: int, pairs: int, device: torch.device) -> bool:
    """Whether :func:`_for_sentences` hands ``tasks`` sentences of ``pairs`` pairs to the worker pool."""
    few = tasks < POOL_TASKS_PER_THREAD * torch.get_num_threads() and pairs < LARGE_PAIRS
    return threads.pooled(tasks, device) and not (pairs < PARALLEL_PAIRS or few)


#: Bucket codes converted to int32 at once by :func:`_gather_rows` (256 KiB: the ids stay in cache).
GATHER_CHUNK = 1 << 16


@torch.no_grad()
def _gather_rows(rows: torch.Tensor, codes: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[r] = rows[r, codes]`` for every row: 1-D ``index_select`` per row (along dim 1 it is several times
    slower) with int32 ids (half the cost of int64), converted :data:`GATHER_CHUNK` codes at a time (converting
    the whole ``(n * n)`` first costs as much again as the gather).

    Shapes:
        rows ``(r, K + 2)``; codes ``(m)`` of any integer dtype; out ``(r, m)``. Returns ``out``.
    """
    ids = torch.empty(min(codes.numel(), GATHER_CHUNK), dtype=torch.int32, device=codes.device)
    for c0 in range(0, codes.numel(), GATHER_CHUNK):
        c1 = min(codes.numel(), c0 + GATHER_CHUNK)
        part = ids[: c1 - c0].copy_(codes[c0:c1])
        for r in range(rows.shape[0]):
            torch.index_select(rows[r], 0, part, out=out[r, c0:c1])
    return out


_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)

#: Pairs per backward span of :class:`BucketBiasSDPA` (its bias and shared-table accumulator; 4 MiB each in float32).
#: Raised from 2^19 for long sentences (a head group's per-head bias still holds half of it, so n <= 512 runs as
#: before): whole 1024-token sentences per span, 512-row spans at n = 2048; fwd+bwd at 1 thread 1.45x -> 1.40x SDPA
#: (n = 1024, b = 8) and 1.45x -> 1.33x (n = 2048, b = 4).
CHUNK_ELEMENTS = 1 << 20
#: Bias elements materialised at once per worker by :class:`BucketBiasSDPA`'s forward (2 MiB in float32). Raised
#: from 2^18 so that two 512-token sentences share one fused call: a 2-sentence BERT step with soft_bias on every
#: layer went from 1.111-1.117x to 1.095-1.106x the plain model at 2 threads (interleaved in one process); the
#: outputs are the same bits.
FORWARD_BIAS_ELEMENTS = 1 << 19
#: Scores per backward block at most (``P`` and ``dS`` of a block: 4 MiB each in float32), see :func:`_block_shape`.
#: Raised from 2^19 for tasks of 2^18 ``q`` elements and more (h = 8, d = 64, n >= 512): at n = 512 fwd+bwd went
#: from 1.44x to 1.34x SDPA at 1 thread and from 1.59x to 1.37x at 2 threads (b = 8; b = 2: 1.57x -> 1.42x).
BLOCK_ELEMENTS = 1 << 20


class BucketBiasSDPA(torch.autograd.Function):
    """``softmax(q k^T / sqrt(d) + ext[index]) v`` with the gradient of the bucket table, on CPU.

    Forward: the fused CPU flash kernel with the (detached) float bias; saves ``out`` and its logsumexp, not
    the ``(b, h, n, n)`` probabilities; padded query rows are zeroed in place. Backward, per sentence and
    head range (one task each), span by span (:data:`CHUNK_ELEMENTS` pairs: the bias is gathered once per
    span), head group by head group, block by block (:data:`BLOCK_ELEMENTS` scores, see
    :func:`_block_shape`): recompute ``P = exp(S + bias - lse)`` and ``dS = P * (dO V^T - rowsum(dO * O))``
    (``bias - lse`` and ``-rowsum(dO * O)`` are the added input of the two products, the scale their
    ``alpha``), ``dq = dS K / sqrt(d)``, ``dk = dS^T Q / sqrt(d)``, ``dv = P^T dO``;
    ``d_ext[m] = sum of dS over the pairs in bucket m`` is one ``bincount`` per span of ``dS`` summed over
    the heads (shared table) or per head. ``P`` and ``dS`` are formed once per block. Extra memory: the
    bias of a few sentences in the forward; a span's bias and accumulator plus one block per thread in
    the backward.

    The tasks run through :func:`per_sentence` (worker threads, single-threaded ops). Short sentences, each a
    single block, run several per op instead (:func:`_backward_group`; the same products, equal to rounding).

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
        saved = (grad_out, q, k, v, lse, neg_delta, ext, index, token_mask, grads)
        group = _sentence_group(h, n, d)
        if splits == 1 and group and n * n < PARALLEL_PAIRS:  # short sentences: whole sentences per op
            parts = [part for g0 in range(0, b, group) for part in _backward_group(g0, min(b, g0 + group), *saved)]
        else:
            tasks = [(bi, h * s // splits, h * (s + 1) // splits) for bi in range(b) for s in range(splits)]
            parts = _for_sentences(lambda task: _backward_task(task, *saved), tasks, n * n, q.device)
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

    _for_sentences(run, range(0, b, group), n * n, q.device)
    return out, lse


def _block_shape(h: int, n: int, d: int | None = None) -> tuple[int, int, int]:
    """(query rows per span, heads per group, query rows per block) of the backward, each at least 1.

    A span's bias and shared-table accumulator hold at most :data:`CHUNK_ELEMENTS` pairs; a group of heads
    shares the span's bias (as many heads as fit in half a chunk, so that short sentences run few, batched ops);
    a block's ``P`` and ``dS`` hold at most :data:`BLOCK_ELEMENTS` scores and, given the head dim ``d``, no
    more than a quarter of that or twice the task's ``q`` (``2 h n d``), whichever is larger: short sentences
    keep the per-thread buffers small beside the ``(b, h, n, d)`` tensors that SDPA needs too (peak memory),
    long ones get blocks of 256-512 full rows.
    """
    span = max(1, min(n, CHUNK_ELEMENTS // n))
    heads = max(1, min(h, CHUNK_ELEMENTS // 2 // (span * n)))
    block = BLOCK_ELEMENTS if d is None else _block_scores(h, n, d)
    return span, heads, max(1, min(span, block // (heads * n)))


def _block_scores(h: int, n: int, d: int) -> int:
    """Scores per backward block for a task of ``h`` heads: :data:`BLOCK_ELEMENTS`, capped at the larger of a
    quarter of it and ``2 h n d`` (see :func:`_block_shape`)."""
    return min(BLOCK_ELEMENTS, max(BLOCK_ELEMENTS // 4, 2 * h * n * d))


def _sentence_group(h: int, n: int, d: int) -> int:
    """Sentences per :func:`_backward_group`: as many whole ``(h, n, n)`` score tensors as fit in one backward
    block of :func:`_block_shape` (then the group computes exactly what the per-sentence tasks would); else 1
    while a sentence's scores fit in half of :data:`BLOCK_ELEMENTS` (n <= 256 at h = 8: one block of all rows
    instead of the tasks' row blocks, fwd+bwd vs SDPA at n = 256, b = 8, each timed right after SDPA: 1.32-1.41x
    -> 1.27-1.33x at 1 thread, 1.46-1.66x -> 1.48-1.56x at 2 threads); else 0 (the tasks' blocked backward)."""
    whole = _block_scores(h, n, d) // (h * n * n)
    return whole if whole else int(h * n * n <= BLOCK_ELEMENTS // 2)


@torch.no_grad()
def _backward_group(g0, g1, grad_out, q, k, v, lse, neg_delta, ext, index, token_mask, grads) -> list[torch.Tensor]:
    """:func:`_backward_task` for sentences ``g0:g1`` at once, every head, when each of them is one block of
    :func:`_block_shape` (one span, one head group, one block: see :func:`_sentence_group`): the same products
    batched over ``(sentence, head)``, so a step of short sentences runs 8 ops per group instead of about 40
    Python-dispatched ops per sentence (fwd+bwd vs SDPA at n = 128, b = 8, each timed right after SDPA in one
    process: 1.38-1.39x -> 1.28-1.34x at 1 thread, 1.67-1.70x -> 1.49-1.55x at 2 threads). Each product is the
    very product of the per-sentence task on the same operands, and the table gradient is still binned sentence
    by sentence. Whether the batched products round as the per-sentence ones do depends on the CPU's BLAS path:
    the same bits on the machine this was written on (one thread), up to about 1e-6 relative in float32 on a
    2-core AMD EPYC (tested to a few units in the last place).
    Returns one ``d_ext`` per sentence."""
    (dq, dk, dv), (_, h, n, d) = grads, q.shape
    m, s, scale = g1 - g0, slice(g0, g1), d**-0.5
    go = grad_out[s]
    if not bool(token_mask[s].all()):
        go = go.masked_fill(~token_mask[s, None, :, None], 0.0)  # padded queries output constant zeros
    bias = gather_bias(ext, index[s])  # (m, 1 or h, n, n)
    p = torch.sub(bias, lse[s, :, :, None], out=torch.empty(m, h, n, n, dtype=q.dtype)).view(m * h, n, n)  # P's buffer
    del bias
    p.baddbmm_(q[s].flatten(0, 1), k[s].flatten(0, 1).transpose(1, 2), alpha=scale).exp_()  # P
    ds = torch.baddbmm(neg_delta[s].flatten(0, 1), go.flatten(0, 1), v[s].flatten(0, 1).transpose(1, 2)).mul_(p)
    dq[s].flatten(0, 1).baddbmm_(ds, k[s].flatten(0, 1), beta=0.0, alpha=scale)
    dk[s].flatten(0, 1).baddbmm_(ds.transpose(1, 2), q[s].flatten(0, 1), beta=0.0, alpha=scale)
    dv[s].flatten(0, 1).baddbmm_(p.transpose(1, 2), go.flatten(0, 1), beta=0.0)
    ds = ds.view(m, h, n * n)
    per_pair = ds if ext.dim() == 2 else (ds.sum(1, keepdim=True) if h > 1 else ds)  # (m, h or 1, n n)
    parts = []
    for i in range(m):
        codes, part = index[g0 + i].reshape(-1), torch.zeros_like(ext)
        for j in range(per_pair.shape[1]):
            binned = torch.bincount(codes, weights=per_pair[i, j], minlength=ext.shape[-1])
            (part[j] if ext.dim() == 2 else part).add_(binned)
        parts.append(part)
    return parts


@torch.no_grad()  # worker threads start with grad mode on; the backward itself is not differentiable
def _backward_task(task, grad_out, q, k, v, lse, neg_delta, ext, index, token_mask, grads) -> torch.Tensor:
    """Gradients of sentence ``bi``, heads ``h0:h1`` (written into ``grads``); returns its ``d_ext``.

    Loop order span -> head group -> block: a group's ``k``, ``v``, ``dk``, ``dv`` stay in cache over the
    blocks of a span, and a block costs 8 ops. Per span the bucket codes are gathered into the bias once; a shared
    table sums ``dS`` over the heads into a span accumulator and bins it once (``bincount`` on the stored
    codes): one pass per span for the per-pair reduction, not one per head.
    """
    bi, h0, h1 = task
    n = q.shape[-2]
    span, heads, rows = _block_shape(h1 - h0, n, q.shape[-1])
    per_head, size = ext.dim() == 2, ext.shape[-1]
    d_ext = torch.zeros_like(ext)
    padded = None if bool(token_mask[bi].all()) else ~token_mask[bi, :, None]
    scratch = torch.empty(2, heads * rows * n, dtype=q.dtype)  # P and dS of every block (see _group_span)
    for s0 in range(0, n, span):
        s1 = min(n, s0 + span)
        codes = index[bi, s0:s1].reshape(-1)  # (span * n), stored dtype (uint8 or int32)
        shared = None if per_head else _head_bias(ext[None], codes, 0, 1, s1 - s0, n)  # (1, span, n)
        ds_heads = None if per_head else torch.zeros(s1 - s0, n, dtype=q.dtype)
        for g0 in range(h0, h1, heads):
            g1 = min(h1, g0 + heads)
            bias = _head_bias(ext, codes, g0, g1, s1 - s0, n) if per_head else shared
            ds_span = _group_span(bi, g0, g1, s0, s1, rows, bias, padded, grad_out, q, k, v, lse, neg_delta,
                                  grads, ds_heads, scratch)
            for j, hi in enumerate(range(g0, g1) if per_head else ()):
                d_ext[hi] += torch.bincount(codes, weights=ds_span[j].view(-1), minlength=size)
        if ds_heads is not None:
            d_ext += torch.bincount(codes, weights=ds_heads.view(-1), minlength=size)
    return d_ext


def _head_bias(ext, codes, g0, g1, rows, n) -> torch.Tensor:
    """Per-head bias ``ext[g, codes]`` of heads ``g0:g1``: ``(g1 - g0, rows, n)``."""
    out = torch.empty(g1 - g0, codes.numel(), dtype=ext.dtype)
    return _gather_rows(ext[g0:g1], codes, out).view(g1 - g0, rows, n)


def _group_span(bi, g0, g1, s0, s1, rows, bias, padded, grad_out, q, k, v, lse, neg_delta, grads,
                ds_heads, scratch) -> torch.Tensor | None:
    """Blocks of rows ``s0:s1`` of heads ``g0:g1``: writes ``dq``, accumulates ``dk``, ``dv`` (the first rows
    of the sentence overwrite them) and adds ``dS`` into ``ds_heads`` (shared table) or returns it whole
    (per-head table: ``(g1 - g0, s1 - s0, n)``). ``P = exp((bias - lse) + q k^T / sqrt(d))`` and
    ``dS = P * (-rowsum(dO * O) + dO v^T)``: each bracketed term is the added input of one ``baddbmm``
    (written into the block's own buffer by one ``sub``), so neither product needs an augmented operand:
    against the earlier extra column ``[q / sqrt(d), -lse] [k, 1]^T`` (four ``cat`` and a scaling ``mul`` per
    group), fwd+bwd took 0.93x / 0.94x / 0.94x / 0.99x the time at n = 128 / 256 / 512 / 1024 on 1 thread and
    0.93x / 0.96x / 0.98x / 0.97x on 2 (b = 8; median per-round ratio of 20 rounds, both versions timed in one
    process, each right after SDPA, the order alternating). ``P`` and ``dS`` are written into the task's
    ``scratch`` (two flat buffers, reused by every block of the task) instead of two fresh tensors a block:
    0.96x / 0.97x the time at n = 1024 / 512 and 0.95x at n = 2048 (b = 4) on 1 thread, 0.97-0.99x / 1.00x at
    2 threads, measured the same way on a 2-core Xeon (AVX-512). The short-sentence groups keep fresh buffers:
    one scratch for all groups made n = 128 1.02-1.05x slower."""
    (dq, dk, dv), d = grads, q.shape[-1]
    scale, heads = d**-0.5, slice(g0, g1)
    qs, go = q[bi, heads, s0:s1], grad_out[bi, heads, s0:s1]
    if padded is not None:
        go = go.masked_fill(padded[s0:s1], 0.0)  # padded queries output constant zeros
    k_h, dq_h, dk_h, dv_h = k[bi, heads], dq[bi, heads, s0:s1], dk[bi, heads], dv[bi, heads]
    k_t, v_t = k_h.transpose(1, 2), v[bi, heads].transpose(1, 2)  # (g, d, n)
    lse_g, neg_delta_g = lse[bi, heads, s0:s1, None], neg_delta[bi, heads, s0:s1]  # (g, span, 1)
    ds_span = torch.empty(bias.shape, dtype=q.dtype) if ds_heads is None else None
    for a in range(0, s1 - s0, rows):
        z = min(s1 - s0, a + rows)
        shape = (g1 - g0, z - a, bias.shape[-1])  # (g, r, n)
        p, ds = (buffer[: math.prod(shape)].view(shape) for buffer in scratch)
        torch.sub(bias[:, a:z], lse_g[:, a:z], out=p).baddbmm_(qs[:, a:z], k_t, alpha=scale).exp_()  # P = exp(bias - lse + S)
        torch.baddbmm(neg_delta_g[:, a:z], go[:, a:z], v_t, out=ds).mul_(p)  # dS
        if ds_heads is None:
            ds_span[:, a:z] = ds
        else:
            ds_heads[a:z] += ds.sum(0) if g1 - g0 > 1 else ds[0]
        beta = 0.0 if s0 + a == 0 else 1.0
        dq_h[:, a:z].baddbmm_(ds, k_h, beta=0.0, alpha=scale)
        dk_h.baddbmm_(ds.transpose(1, 2), qs[:, a:z], beta=beta, alpha=scale)
        dv_h.baddbmm_(p.transpose(1, 2), go[:, a:z], beta=beta)
    return ds_span


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
