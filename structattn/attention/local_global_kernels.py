"""Linear-memory kernels behind ``local_global`` (private to that variant).

Glossary: b batch, h heads, n tokens, d head dim, s dilation residue, m tokens per residue group, t block,
c queries per block, w window slot (``W = c + 2 r`` keys per block), g global slot (``G`` per row, padded).

A dilated band ``|i - j| <= r * dil, dil | (i - j)`` only links tokens of equal residue ``i mod dil``, so the
sequence is split into ``dil`` interleaved groups of ``m = ceil(n / dil)`` tokens, each an undilated band of
radius ``r``. Each group is cut into blocks of ``c`` queries that see ``c + 2 r`` keys; global keys are
gathered once per row (``G`` slots) and scored against every query; global queries get full rows
``(G, n)``. Nothing of size ``n x n`` is built (except :func:`densify_weights`, on request).

Two paths compute the local rows: :class:`BandAttention` (the default: slabs of blocks, a recomputing
backward, memory independent of the window count) and :func:`local_rows` (plain autograd over all blocks at
once; used when the weights are asked for, since it keeps them). :func:`flex_local_global` is the
FlexAttention backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange

from structattn.attention.masking import compute_dtype, mask_value, sdpa_allowed


@dataclass
class BandLayout:
    """Sizes of the grouped, blocked layout (see the module docstring)."""

    n: int
    radius: int
    dilation: int
    block: int

    @property
    def m(self) -> int:
        return -(-self.n // self.dilation)

    @property
    def blocks(self) -> int:
        return -(-self.m // self.block)

    @property
    def window(self) -> int:
        return self.block + 2 * self.radius


def choose_block(radius: int, n: int, dilation: int, block: int | None) -> int:
    """Queries per block: ``max(radius, 32)`` (at most a group's length) unless given."""
    m = -(-n // dilation)
    return max(1, min(block if block is not None else max(radius, 32), m))


def global_slots(is_global: torch.Tensor | None, token_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row global token indices padded to the largest count ``G``.

    Shapes:
        is_global, token_mask: (b, n) bool. Returns index (b, G) long (0 on unused slots) and valid (b, G) bool.
    """
    b, n = token_mask.shape
    if is_global is None:
        return token_mask.new_zeros(b, 0, dtype=torch.long), token_mask.new_zeros(b, 0)
    flags = is_global & token_mask
    count = flags.sum(-1)
    slots = int(count.max()) if b else 0
    order = torch.argsort((~flags).to(torch.int8), dim=-1, stable=True)[:, :slots]  # global positions first
    valid = torch.arange(slots, device=flags.device)[None, :] < count[:, None]
    return torch.where(valid, order, torch.zeros_like(order)), valid


# -- layout ------------------------------------------------------------------------------------------------
def _grouped(x: torch.Tensor, lay: BandLayout, left: int, right: int, value: float | bool = 0) -> torch.Tensor:
    """``(..., n, d)`` -> ``(..., s, left + m_blocks + right, d)`` padded along the group axis."""
    if lay.m * lay.dilation != lay.n:
        x = F.pad(x, (0, 0, 0, lay.m * lay.dilation - lay.n), value=value)
    x = rearrange(x, "... (m s) d -> ... s m d", s=lay.dilation)
    extra = lay.blocks * lay.block - lay.m + right
    return F.pad(x, (0, 0, left, extra), value=value) if left or extra else x


def _windows(x: torch.Tensor, lay: BandLayout) -> torch.Tensor:
    """Key windows ``(..., s, t, W, d)`` of a ``(..., n, d)`` tensor (a copy of about ``W / c`` times its size)."""
    x = _grouped(x, lay, lay.radius, lay.radius)
    return x.unfold(-2, lay.window, lay.block).transpose(-1, -2)


def band_scores_allowed(token_mask: torch.Tensor, is_global: torch.Tensor | None, lay: BandLayout) -> torch.Tensor:
    """Which window slots a block's queries may use: in the band, real and not global (globals go via slots).

    Shapes: returns (b, 1, s, t, c, W) bool.
    """
    key_ok = token_mask if is_global is None else token_mask & ~is_global
    key_ok = _windows(key_ok[..., None], lay)[..., 0]  # (b, s, t, W)
    a = torch.arange(lay.block, device=token_mask.device)[:, None]
    w = torch.arange(lay.window, device=token_mask.device)[None, :]
    in_band = (w - a >= 0) & (w - a <= 2 * lay.radius)  # (c, W): key offset w - r - a in [-r, r]
    return (in_band & key_ok[..., None, :])[:, None]


def _masked_softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Float32 (float64 stays float64) softmax with a finite minimum on disallowed entries; a row with no
    allowed entry comes out uniform and is overwritten or zeroed by the callers."""
    scores = scores.to(compute_dtype(scores.dtype))
    return torch.softmax(scores.masked_fill(~allowed, mask_value(scores.dtype)), dim=-1)


def _with_globals(windows: torch.Tensor, glob: torch.Tensor | None) -> torch.Tensor:
    """Window keys (or values) followed by the row's global slots: ``(b, h, s, t, W + G, d)``."""
    if glob is None:
        return windows
    return torch.cat([windows, glob[:, :, None, None].expand(*windows.shape[:4], -1, -1)], dim=-2)


# -- eager path (keeps the weights) ------------------------------------------------------------------------
def local_rows(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, token_mask: torch.Tensor, is_global: torch.Tensor | None,
    slots: tuple[torch.Tensor, torch.Tensor], lay: BandLayout,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Every query over its window keys and the global slots (one matmul, one softmax per block).

    Shapes:
        q, k, v: (b, h, n, d). Returns out (b, h, n, d) and the weights on window slots (b, h, s, t, c, W)
        and global slots (b, h, s, t, c, G) (or None when no row has a global token).
    """
    b, h, n, d = q.shape
    index, valid = slots
    allowed = band_scores_allowed(token_mask, is_global, lay)  # (b, 1, s, t, c, W)
    k_glob = v_glob = None
    if index.shape[1]:
        gather = index[:, None, :, None].expand(b, h, -1, d)
        k_glob, v_glob = torch.gather(k, 2, gather), torch.gather(v, 2, gather)  # (b, h, G, d)
        glob_allowed = valid[:, None, None, None, None, :].expand(*allowed.shape[:-1], -1)
        allowed = torch.cat([allowed, glob_allowed], dim=-1)
    qb = rearrange(_grouped(q * d**-0.5, lay, 0, 0), "b h s (t c) d -> b h s t c d", c=lay.block)
    scores = torch.matmul(qb, _with_globals(_windows(k, lay), k_glob).transpose(-1, -2))  # (b, h, s, t, c, W + G)
    scores = scores.to(compute_dtype(scores.dtype)).masked_fill_(~allowed, mask_value(compute_dtype(scores.dtype)))
    weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights.to(v.dtype), _with_globals(_windows(v, lay), v_glob))
    out = rearrange(out, "b h s t c d -> b h s (t c) d")[:, :, :, : lay.m]
    out = rearrange(out, "b h s m d -> b h (m s) d")[:, :, :n]
    width = lay.window
    return out, weights[..., :width], (weights[..., width:] if index.shape[1] else None)


# -- fused path ----------------------------------------------------------------------------------------------
#: Score elements per slab of blocks in :class:`BandAttention` (512 KiB in float32: a slab's few temporaries stay
#: in cache and, at n = 2048, were 10 times the memory of SDPA's whole step with 8 MiB slabs).
SLAB_ELEMENTS = 1 << 17


def _bias(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask: 0 where allowed, ``-max / 8`` elsewhere (``exp`` of it is 0; two still add up finitely)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, -torch.finfo(dtype).max / 8)


class BandAttention(torch.autograd.Function):
    """Blocked band + global-slot attention with a recomputing backward (FlashAttention-style).

    Forward, one slab of query blocks at a time: ``s = q k_window^T + bias`` and ``q k_glob^T + bias``, joint
    max ``m``, ``p = exp(s - m)``, ``out = (p_window v_window + p_glob v_glob) / l``; keeps ``out`` and
    ``lse = m + log l`` only. Backward recomputes ``p = exp(s - lse)`` per slab: ``ds = p (dout v^T - D)``
    with ``D = rowsum(dout * out)``; ``dq = ds k``, window ``dk = ds^T q`` and ``dv = p^T dout`` added back
    over the overlapping windows, global-slot ``dk, dv`` summed. Memory: the inputs, ``out``, ``lse`` and one
    slab (:data:`SLAB_ELEMENTS` scores), whatever n.

    Args (of ``apply``): qg (b, h, s, M, d), not scaled (a view of q where the layout allows: the scale is
    applied per slab, so no scaled copy of q is kept for the backward); kp, vp (b, h, s, M, d) (views of k,
    v where the layout allows; the windows are zero-padded per slab at the two ends); k_glob, v_glob
    (b, h, G, d), detached copies of the global slots' keys, whose gradients are added into those of kp,
    vp at ``glob_slots`` (residue, group position), each (b, G); key_bias (b, 1, s, M + 2r) and glob_bias (b, 1, 1, G) from :func:`_bias`; block c;
    radius r; scale (``d ** -0.5``). Returns out (b, h, s, M, d).
    """

    @staticmethod
    def forward(ctx, qg, kp, vp, k_glob, v_glob, key_bias, glob_bias, block: int, radius: int, scale: float,  # type: ignore[override]
                glob_slots: tuple[torch.Tensor, torch.Tensor, torch.Tensor], row_bias: torch.Tensor):
        out = torch.empty_like(qg)
        lse = qg.new_empty(qg.shape[:-1])
        for lo, hi, sb, sg in _slab_scores(qg, kp, k_glob, key_bias, glob_bias, block, radius, scale):
            m = sb.amax(-1, keepdim=True) if sg is None else torch.maximum(sb.amax(-1, keepdim=True), sg.amax(-1, keepdim=True))
            pb = sb.sub_(m).exp_()
            total = pb.sum(-1, keepdim=True)
            o = torch.matmul(pb, _unfold(vp, lo, hi, block, radius).transpose(-1, -2))
            if sg is not None:
                pg = sg.sub_(m).exp_()
                total += pg.sum(-1, keepdim=True)
                o += torch.matmul(pg, v_glob[:, :, None, None])
            out[:, :, :, lo:hi] = (o / total).flatten(3, 4)
            lse[:, :, :, lo:hi] = (m + total.log()).flatten(3, 5)
        lse_glob = _global_rows_forward(qg, kp, vp, out, glob_slots, row_bias, scale) if k_glob.shape[2] else None
        ctx.save_for_backward(qg, kp, vp, k_glob, v_glob, key_bias, glob_bias, out, lse)
        ctx.sizes, ctx.glob_slots, ctx.glob_rows = (block, radius, scale), glob_slots, (row_bias, lse_glob)
        return out

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        qg, kp, vp, k_glob, v_glob, key_bias, glob_bias, out, lse = ctx.saved_tensors
        block, radius, scale = ctx.sizes
        go_glob = None
        if k_glob.shape[2]:  # the global rows are handled apart: their band rows get no gradient
            go_glob = _at_slots(grad_out, ctx.glob_slots) * ctx.glob_slots[2][:, None, :, None]
            grad_out = grad_out.clone(memory_format=torch.contiguous_format)
            _put_slots(grad_out, ctx.glob_slots, torch.zeros_like(go_glob))
        grad_out = grad_out.contiguous()
        delta = (grad_out * out).sum(-1)  # (b, h, s, M)
        padded = (*kp.shape[:3], kp.shape[3] + 2 * radius, kp.shape[4])  # dk, dv with r slots on each side
        dq, dk, dv = torch.zeros_like(qg), kp.new_zeros(padded), vp.new_zeros(padded)
        dk_glob, dv_glob = torch.zeros_like(k_glob), torch.zeros_like(v_glob)
        for lo, hi, sb, sg in _slab_scores(qg, kp, k_glob, key_bias, glob_bias, block, radius, scale):
            shape = (*qg.shape[:3], (hi - lo) // block, block)
            lse_s, delta_s = lse[:, :, :, lo:hi].reshape(*shape, 1), delta[:, :, :, lo:hi].reshape(*shape, 1)
            go = grad_out[:, :, :, lo:hi].reshape(*shape, -1)
            qs = qg[:, :, :, lo:hi].reshape(*shape, -1) * scale
            pb = sb.sub_(lse_s).exp_()
            dsb = torch.matmul(go, _unfold(vp, lo, hi, block, radius)).sub_(delta_s).mul_(pb)
            k_win = _unfold(kp, lo, hi, block, radius)  # (..., d, W)
            dq_s = torch.matmul(dsb, k_win.transpose(-1, -2))
            _overlap_add(dk, torch.matmul(dsb.transpose(-1, -2), qs), lo, hi, block, radius)
            _overlap_add(dv, torch.matmul(pb.transpose(-1, -2), go), lo, hi, block, radius)
            if sg is not None:
                pg = sg.sub_(lse_s).exp_()
                dsg = torch.matmul(go, v_glob[:, :, None, None].transpose(-1, -2)).sub_(delta_s).mul_(pg)
                dq_s += torch.matmul(dsg, k_glob[:, :, None, None])
                dk_glob += torch.einsum("bhstcg,bhstcd->bhgd", dsg, qs)
                dv_glob += torch.einsum("bhstcg,bhstcd->bhgd", pg, go)
            dq[:, :, :, lo:hi] = dq_s.flatten(3, 4).mul_(scale)  # d/dq of (q * scale) k^T
        if k_glob.shape[2]:  # the global slots' key gradients go straight into dk, dv (no gather backward)
            residue, position, _ = ctx.glob_slots  # (b, G) each, grouped coordinates
            where = _slot_index(qg, (residue, position + radius))
            dk.index_put_(where, dk_glob, accumulate=True)
            dv.index_put_(where, dv_glob, accumulate=True)
            _global_rows_backward(qg, kp, vp, out, go_glob, ctx.glob_slots, *ctx.glob_rows, scale, radius, dq, dk, dv)
        inner = slice(radius, radius + kp.shape[3])
        return dq, dk[:, :, :, inner], dv[:, :, :, inner], None, None, None, None, None, None, None, None, None


def _slot_index(x: torch.Tensor, slots) -> tuple[torch.Tensor, ...]:
    """Advanced index ``(batch, head, residue, position)`` of the slots in ``x`` (b, h, s, M, d): (b, h, G)."""
    b, h = x.shape[:2]
    residue, position = slots[0], slots[1]
    return (torch.arange(b, device=x.device)[:, None, None], torch.arange(h, device=x.device)[None, :, None],
            residue[:, None, :], position[:, None, :])


def _at_slots(x: torch.Tensor, slots) -> torch.Tensor:
    """Rows of the global slots: (b, h, s, M, d) -> (b, h, G, d)."""
    return x[_slot_index(x, slots)]


def _put_slots(x: torch.Tensor, slots, rows: torch.Tensor) -> None:
    """``x[slot] = rows`` for the valid slots only (unused slots point at position 0), in place."""
    bsel, gsel = slots[2].nonzero(as_tuple=True)
    heads = torch.arange(x.shape[1], device=x.device)[None, :]
    where = (bsel[:, None], heads, slots[0][bsel, gsel][:, None], slots[1][bsel, gsel][:, None])
    x.index_put_(where, rows[bsel[:, None], heads, gsel[:, None]])


def _global_rows_forward(qg, kp, vp, out, slots, row_bias, scale) -> torch.Tensor:
    """Global queries over every real key, written into their rows of ``out``; returns their logsumexp
    (b, h, G, 1). The ``(b, h, G, s M)`` scores are small (G global slots)."""
    q_glob = _at_slots(qg, slots) * scale  # (b, h, G, d)
    scores = torch.matmul(q_glob, kp.flatten(2, 3).transpose(-1, -2)) + row_bias  # (b, h, G, s M)
    lse = torch.logsumexp(scores, -1, keepdim=True)
    _put_slots(out, slots, torch.matmul(scores.sub_(lse).exp_(), vp.flatten(2, 3)))
    return lse


def _global_rows_backward(qg, kp, vp, out, go_glob, slots, row_bias, lse, scale, radius, dq, dk, dv) -> None:
    """Gradients of the global rows (``go_glob``: their output gradients, zero on unused slots), added into
    ``dq`` at the slots and into ``dk``, ``dv`` (padded by ``radius``) over all keys, chunk by chunk of keys
    (no ``(b, h, n, d)`` temporary)."""
    q_glob = _at_slots(qg, slots) * scale
    k_flat, v_flat = kp.flatten(2, 3), vp.flatten(2, 3)  # (b, h, s M, d)
    p = torch.matmul(q_glob, k_flat.transpose(-1, -2)).add_(row_bias).sub_(lse).exp_()  # (b, h, G, s M)
    delta = (go_glob * _at_slots(out, slots)).sum(-1, keepdim=True)
    ds = torch.matmul(go_glob, v_flat.transpose(-1, -2)).sub_(delta).mul_(p)
    dq.index_put_(_slot_index(dq, slots), torch.matmul(ds, k_flat) * scale, accumulate=True)
    b, h, s, m, _ = kp.shape
    step = max(1, SLAB_ELEMENTS // (b * h * kp.shape[-1]))
    for r in range(s):
        for lo in range(0, m, step):
            hi = min(m, lo + step)
            cols = slice(r * m + lo, r * m + hi)
            dk[:, :, r, radius + lo : radius + hi] += torch.matmul(ds[..., cols].transpose(-1, -2), q_glob)
            dv[:, :, r, radius + lo : radius + hi] += torch.matmul(p[..., cols].transpose(-1, -2), go_glob)


def _unfold(x: torch.Tensor, lo: int, hi: int, block: int, radius: int) -> torch.Tensor:
    """Windows of the keys of query rows ``[lo, hi)``: ``(b, h, s, T, d, W)``; ``x`` (b, h, s, M, d) holds the
    keys unpadded: a view, except for the slabs at the two ends, whose keys beyond the sequence are zeros."""
    start, stop, size = lo - radius, hi + radius, x.shape[3]
    keys = x[:, :, :, max(start, 0) : min(stop, size)]
    if start < 0 or stop > size:
        keys = F.pad(keys, (0, 0, max(0, -start), max(0, stop - size)))
    return keys.unfold(3, block + 2 * radius, block)


def _overlap_add(target: torch.Tensor, windows: torch.Tensor, lo: int, hi: int, block: int, radius: int) -> None:
    """``target[..., lo + t c + w, :] += windows[..., t, w, :]`` for the window slots of blocks ``[lo, hi)``."""
    width = block + 2 * radius
    count = (hi - lo) // block
    index = (torch.arange(count, device=target.device)[:, None] * block + torch.arange(width, device=target.device)).flatten()
    target[:, :, :, lo : hi + 2 * radius].index_add_(3, index, windows.flatten(3, 4))


def _slab_scores(qg, kp, k_glob, key_bias, glob_bias, block: int, radius: int, scale: float):
    """Yield ``(lo, hi, band scores (b, h, s, T, c, W), global scores (..., G) or None)`` with biases added."""
    b, h, s, rows, d = qg.shape
    width = block + 2 * radius
    glob = k_glob.shape[2]
    a = torch.arange(block, device=qg.device)[:, None]
    w = torch.arange(width, device=qg.device)[None, :]
    band = _bias((w - a >= 0) & (w - a <= 2 * radius), qg.dtype)  # (c, W)
    per_slab = max(1, SLAB_ELEMENTS // max(1, b * h * s * block * (width + glob)))
    for t0 in range(0, rows // block, per_slab):
        lo, hi = t0 * block, min(rows, (t0 + per_slab) * block)
        qs = qg[:, :, :, lo:hi].unflatten(3, ((hi - lo) // block, block)) * scale
        sb = torch.matmul(qs, _unfold(kp, lo, hi, block, radius))
        sb += band
        sb += key_bias[:, :, :, lo : hi + 2 * radius].unfold(3, width, block)[:, :, :, :, None, :]
        sg = None
        if glob:
            sg = torch.matmul(qs, k_glob[:, :, None, None].transpose(-1, -2))
            sg += glob_bias[:, :, :, None, None, :]
        yield lo, hi, sb, sg


def fused_local_rows(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, token_mask: torch.Tensor, is_global: torch.Tensor | None,
    slots: tuple[torch.Tensor, torch.Tensor], lay: BandLayout,
) -> torch.Tensor:
    """:func:`local_rows` and the global rows through :class:`BandAttention` (output only).

    Shapes: (b, h, n, d) -> (b, h, n, d).
    """
    b, h, n, d = q.shape
    work = compute_dtype(q.dtype)
    index, valid = slots
    key_ok = token_mask if is_global is None else token_mask & ~is_global
    key_bias = _grouped(key_ok[..., None], lay, lay.radius, lay.radius, False)[..., 0]  # (b, s, M + 2r)
    key_bias = _bias(key_bias, work)[:, None]
    glob_bias = _bias(valid, work)[:, None, None]
    gather = index[:, None, :, None].expand(b, h, -1, d)
    # detached: BandAttention adds the global slots' key gradients into those of kp, vp itself
    k_glob, v_glob = torch.gather(k.detach(), 2, gather).to(work), torch.gather(v.detach(), 2, gather).to(work)
    glob_slots = (index % lay.dilation, index // lay.dilation, valid)
    real = _grouped(token_mask[..., None], lay, 0, 0, False)[..., 0]  # (b, s, M): keys of the global rows
    row_bias = _bias(real, work).flatten(1)[:, None, None]  # (b, 1, 1, s M)
    qg = _grouped(q.to(work), lay, 0, 0)  # a view of q for dilation 1 and whole blocks
    kp, vp = (_grouped(x.to(work), lay, 0, 0) for x in (k, v))  # views of k, v for dilation 1, whole blocks
    out = BandAttention.apply(qg.contiguous(), kp.contiguous(), vp.contiguous(), k_glob, v_glob, key_bias, glob_bias, lay.block, lay.radius, d**-0.5, glob_slots, row_bias)
    out = rearrange(out[:, :, :, : lay.m], "b h s m d -> b h (m s) d")[:, :, :n]
    return out.to(q.dtype)


# -- global rows, entry point, dense weights ------------------------------------------------------------------
def global_rows(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, token_mask: torch.Tensor, slots: tuple[torch.Tensor, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Global queries over every real key.

    Shapes: returns out (b, h, G, d) (one row per global slot; unused slots hold garbage) and weights
    (b, h, G, n).
    """
    b, h, n, d = q.shape
    index, valid = slots
    q_glob = torch.gather(q, 2, index[:, None, :, None].expand(b, h, -1, d))
    scores = torch.matmul(q_glob, k.transpose(-1, -2)) / math.sqrt(d)  # (b, h, G, n)
    weights = _masked_softmax(scores, token_mask[:, None, None, :].expand_as(scores))
    return torch.matmul(weights.to(v.dtype), v), weights


def put_global_rows(out: torch.Tensor, out_glob: torch.Tensor, slots: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``out`` with the rows of the valid global slots replaced by ``out_glob`` (one copy of ``out``; its
    backward zeroes those rows of one gradient, where a ``where`` over a scattered copy made two).

    Shapes: out (b, h, n, d), out_glob (b, h, G, d); returns (b, h, n, d).
    """
    index, valid = slots
    bi, gi = valid.nonzero(as_tuple=True)
    rows = index[bi, gi]
    heads = torch.arange(out.shape[1], device=out.device)[None, :]
    values = out_glob[bi[:, None], heads, gi[:, None]]  # (P, h, d)
    return out.index_put((bi[:, None], heads, rows[:, None]), values)  # keeps out's (contiguous) layout


def banded_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, token_mask: torch.Tensor, is_global: torch.Tensor | None,
    radius: int, dilation: int, block: int | None = None, return_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Longformer attention in ``O(n (c + 2 r + G))`` time and memory; weights densified only on request.
    float16 / bfloat16 inputs are computed in float32 (scores, softmax, ``w @ v``); outputs in the input dtype.

    Shapes:
        q, k, v: (b, h, n, d); token_mask, is_global: (b, n) bool. Returns (b, h, n, d), (b, h, n, n) or None.
    """
    # under autocast (training's bf16 path) the kernels still compute in the dtype they choose: autocast would
    # turn their float32 products into bfloat16 ones and break the in-place writes into float32 buffers
    with torch.autocast(q.device.type, enabled=False):
        return _banded_attention(q, k, v, token_mask, is_global, radius, dilation, block, return_weights)


def _banded_attention(q, k, v, token_mask, is_global, radius, dilation, block, return_weights):
    n, dtype = q.shape[2], q.dtype
    # half inputs are computed in float32 throughout: a float16 score overflows for |q|, |k| ~ 300
    q, k, v = (x.to(compute_dtype(dtype)) for x in (q, k, v))
    if radius * dilation >= n - 1 and dilation == 1 and not return_weights:
        # the window covers the whole sequence: every real pair is allowed; fused SDPA, (b, 1, 1, n) mask
        return sdpa_allowed(q, k, v, token_mask[:, None, None, :]).to(dtype), None
    lay = BandLayout(n, radius, dilation, choose_block(radius, n, dilation, block))
    slots = global_slots(is_global, token_mask)
    if return_weights:
        out, band_w, glob_w = local_rows(q, k, v, token_mask, is_global, slots, lay)
    else:
        out, band_w, glob_w = fused_local_rows(q, k, v, token_mask, is_global, slots, lay), None, None
    row_w = None
    if slots[0].shape[1] and return_weights:  # the fused path computes the global rows itself
        glob_out, row_w = global_rows(q, k, v, token_mask, slots)
        out = put_global_rows(out, glob_out, slots)
    if not return_weights:
        return out.to(dtype), None
    return out.to(dtype), densify_weights(band_w, glob_w, row_w, slots, token_mask, is_global, lay).to(dtype)


def densify_weights(
    band_w: torch.Tensor, glob_w: torch.Tensor | None, row_w: torch.Tensor | None,
    slots: tuple[torch.Tensor, torch.Tensor], token_mask: torch.Tensor, is_global: torch.Tensor | None, lay: BandLayout,
) -> torch.Tensor:
    """The dense ``(b, h, n, n)`` weights assembled from the band, global-key and global-row parts."""
    b, h = band_w.shape[:2]
    n, dev = lay.n, band_w.device
    s = torch.arange(lay.dilation, device=dev)[:, None, None]
    t = torch.arange(lay.blocks, device=dev)[None, :, None]
    query = (t * lay.block + torch.arange(lay.block, device=dev)) * lay.dilation + s  # (s, t, c)
    key_g = t * lay.block + torch.arange(lay.window, device=dev) - lay.radius  # (1, t, W) group positions
    key = key_g * lay.dilation + s  # (s, t, W)
    key = torch.where((key_g >= 0) & (key_g < lay.m) & (key < n), key, torch.full_like(key, n))
    query = torch.where(query < n, query, torch.full_like(query, n))
    dense = band_w.new_zeros(b, h, n + 1, n + 1)
    dense[:, :, query[..., :, None], key[..., None, :]] = band_w
    index, valid = slots
    if glob_w is not None:
        cols = torch.where(valid, index, torch.full_like(index, n))  # (b, G)
        rows = query.reshape(-1)
        flat = rearrange(glob_w, "b h s t c g -> b h (s t c) g")
        bi = torch.arange(b, device=dev)[:, None, None, None]
        hi = torch.arange(h, device=dev)[None, :, None, None]
        dense[bi, hi, rows[None, None, :, None], cols[:, None, None, :]] = flat
        rows_g = torch.where(valid, index, torch.full_like(index, n))
        dense[bi[..., 0], hi[..., 0], rows_g[:, None, :], : n] = row_w
    return dense[:, :, :n, :n]


# -- FlexAttention backend ---------------------------------------------------------------------------------
_COMPILED: dict[str, object] = {}


def flex_available() -> bool:
    """Whether ``torch.nn.attention.flex_attention`` can be imported."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def flex_local_global(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, token_mask: torch.Tensor, is_global: torch.Tensor | None,
    radius: int, dilation: int,
) -> torch.Tensor:
    """Longformer attention through a compiled ``flex_attention`` with a block mask (same allowed set).

    The block mask is built from the compact form (which 128 x 128 tiles can hold an allowed pair: band,
    global rows and columns, real tokens), an ``(n / 128)^2`` table per row, never an ``n x n`` one; the
    ``mask_mod`` then decides pair by pair inside those tiles.

    Shapes:
        q, k, v: (b, h, n, d); token_mask, is_global: (b, n) bool. Returns (b, h, n, d) (padded query rows: zeroed by the caller).
    """
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    b, _, n, _ = q.shape
    span = radius * dilation
    real = token_mask
    flags = (is_global if is_global is not None else torch.zeros_like(token_mask)) & token_mask

    def allowed(bi: torch.Tensor, hi: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        offset = (i - j).abs()
        band = (offset <= span) & (offset % dilation == 0)
        return real[bi, i] & real[bi, j] & (band | flags[bi, i] | flags[bi, j])

    tiles = _flex_tiles(real, flags, span)
    kv_num = tiles.sum(-1, dtype=torch.int32)[:, None]  # (b, 1, T)
    kv_index = torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)[:, None]  # (b, 1, T, T)
    block_mask = BlockMask.from_kv_blocks(kv_num, kv_index, BLOCK_SIZE=FLEX_TILE, mask_mod=allowed, seq_lengths=(n, n))
    key = q.device.type
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(flex_attention, dynamic=False)
    return _COMPILED[key](q, k, v, block_mask=block_mask)


#: FlexAttention tile size (its default sparse block size).
FLEX_TILE = 128


def _flex_tiles(real: torch.Tensor, flags: torch.Tensor, span: int) -> torch.Tensor:
    """``(b, T, T)`` bool: whether query tile ``i`` and key tile ``j`` can hold an allowed pair."""
    b, n = real.shape
    count = -(-n // FLEX_TILE)
    start = torch.arange(count, device=real.device) * FLEX_TILE
    end = torch.clamp(start + FLEX_TILE, max=n) - 1
    gap = (start[None, :] - end[:, None]).clamp(min=0) + (start[:, None] - end[None, :]).clamp(min=0)
    band = gap <= span  # (T, T): the tiles come within the window of each other

    def per_tile(x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, (0, count * FLEX_TILE - n)).view(b, count, FLEX_TILE).any(-1)

    real_t, glob_t = per_tile(real), per_tile(flags)
    return (band | glob_t[:, :, None] | glob_t[:, None, :]) & real_t[:, :, None] & real_t[:, None, :]
