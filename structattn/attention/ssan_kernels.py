"""The fused selection kernels behind ``ssan`` (private to that variant).

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.

Both kernels work over blocks of (heads, query rows), flash-style: the scores ``s``, probabilities ``p``,
selection and weights of one block live only while that block is processed, and backward recomputes them
from the policy logits ``z`` and per-row statistics. The only ``(b, h, n, n)`` tensor kept is ``z`` itself
(plus the weights when the caller asks for them).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

#: Cap on ``s_ij - m_i`` before ``exp`` in the rare fallback that anchors on the largest *selected* score
#: (unselected keys then only enter the straight-through gradient); ``exp(80) * n`` stays finite in float32.
_EXP_CAP = 80.0
#: Cap on ``s_j - lse_sel`` (log-space) in the straight-through policy gradient ``r`` (see
#: :class:`SelectiveAttention`): an unselected key scoring more than 30 above the selected set's log-sum-exp
#: would otherwise get a gradient ``exp(s_j - lse_sel)`` beyond what float32 can square (Adam, clipping).
_LOG_GRAD_CAP = 30.0
#: Elements of one block's ``(heads, rows, n)`` temporaries (~1 MiB in float32: stays in a core's L2).
_BLOCK_ELEMENTS = 1 << 18
#: Query rows per block (enough rows per block that ``k`` and ``v`` are re-read rarely).
_BLOCK_ROWS = 64
#: Largest (n, n) done as one block per head (whole query rows).
_WHOLE_ROWS = 1 << 20


class SelectiveAttention(torch.autograd.Function):
    """Scores, selection, masked softmax and ``w @ v`` with the straight-through gradient written out, taking
    the policy logits ``energy`` as a (differentiable) tensor. ``ssan`` itself uses
    :class:`PolicySelectiveAttention`, which also fuses the policy product; this one is the same kernel for a
    caller holding ``energy``.

    Forward: ``s = q k^T (+ bias)`` (``q`` already scaled by ``1 / sqrt(d)``); ``z = energy + noise`` (the noise
    buffer is overwritten with ``z``) or ``z = energy``; ``p = sigmoid(z)``; ``sel = p > threshold`` (exactly
    0/1, decided as ``z > logit(threshold)``) or ``sel = p`` (soft), zero on padding keys;
    ``w = sel * exp(s - lse_sel)`` with ``lse_sel`` the log-sum-exp of the selected scores (weighted by ``sel``), computed with the largest real score as the shift
    (or, should every selected term of a row underflow, the largest selected one); ``out = w @ v``. Rows of
    padded queries and rows with nothing selected have ``lse_sel = +inf``: zero weights, no gradient.

    Backward, per block, with ``dw = dout v^T`` and ``t = dw - rowsum(dw * w)`` (``= dw - rowsum(dout * out)``
    when ``w`` itself gets no gradient): ``ds = w * t`` (-> ``dq = ds k``, ``dk = ds^T q``, ``dbias``),
    ``dv = w^T dout`` and ``dz = t * r`` with ``r = exp(s - lse_sel) p (1 - p)`` (straight-through:
    ``d sel / d p = 1``), the exponent capped at :data:`_LOG_GRAD_CAP` (only unselected keys scoring far above
    every selected one reach it). Kept for backward: ``z`` and the per-row ``lse_sel``.

    Shapes:
        energy, noise: (b, h, n, n); scratch: unused (kept for the call signature: the kernel needs no
        second buffer any more);
        q, k, v: (b, h, n, d); bias: broadcastable to (b, h, n, n) or None;
        key_real: (b, 1, 1, n); query_real: (b, 1, n, 1). Returns out (b, h, n, d), w (b, h, n, n) and the
        number of (real query, real key) pairs above the threshold (a 0-d tensor).
    """

    @staticmethod
    def forward(ctx, energy, noise, scratch, q, k, v, bias, key_real, query_real, soft: bool, threshold: float):  # type: ignore[override]
        z = energy.detach() if noise is None else noise.add_(energy)
        out, w, lse, selected = _forward(z, q, k, v, bias, key_real, query_real, soft, threshold, True)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(z, q, k, v, bias, key_real, out, lse)
        ctx.options = (soft, threshold)
        ctx.mark_non_differentiable(selected)
        return out, w, selected

    @staticmethod
    def backward(ctx, grad_out, grad_w, _grad_count):  # type: ignore[override]
        z, q, k, v, bias, key_real, out, lse = ctx.saved_tensors
        grad_z = torch.empty_like(z) if ctx.needs_input_grad[0] else None
        z3 = grad_z.flatten(0, 1) if grad_z is not None else None

        def store(heads: slice, rows: slice, dz: torch.Tensor, _partial: bool) -> None:
            z3[heads, rows] = dz

        grads = _backward(ctx, z, q, k, v, bias, key_real, out, lse, grad_out, grad_w, store if z3 is not None else None)
        return grad_z, None, None, *grads, None, None, None, None


class PolicySelectiveAttention(torch.autograd.Function):
    """:class:`SelectiveAttention` with the policy product fused in: the policy logits are
    ``z = scale pq pk^T (+ noise)`` (``scale = 1 / tau``; ``z`` given, computed by the caller without a graph),
    and backward returns ``d pq = scale dz pk`` and ``d pk = scale dz^T pq`` block by block, so that no
    ``(b, h, n, n)`` gradient is ever formed.

    Shapes:
        z: (b, h, n, n); pq, pk, q, k, v: (b, h, n, d); the rest as :class:`SelectiveAttention`.
        Returns out (b, h, n, d), the selected count (0-d) and, with ``want_weights``, w (b, h, n, n).
    """

    @staticmethod
    def forward(ctx, z, pq, pk, scale: float, q, k, v, bias, key_real, query_real, soft: bool, threshold: float, want_weights: bool):  # type: ignore[override]
        out, w, lse, selected = _forward(z, q, k, v, bias, key_real, query_real, soft, threshold, want_weights)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(z, pq, pk, q, k, v, bias, key_real, out, lse)
        ctx.options, ctx.scale = (soft, threshold), scale
        ctx.mark_non_differentiable(selected)
        if w is None:
            return out, selected
        return out, selected, w

    @staticmethod
    def backward(ctx, grad_out, _grad_count, grad_w=None):  # type: ignore[override]
        z, pq, pk, q, k, v, bias, key_real, out, lse = ctx.saved_tensors
        need_policy = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        pq3, pk3 = pq.flatten(0, 1), pk.flatten(0, 1)
        whole = _rows(pq.shape[2]) == pq.shape[2]
        grad_pq, grad_pk = torch.empty_like(pq3), (torch.empty_like if whole else torch.zeros_like)(pk3)

        def accumulate(heads: slice, rows: slice, dz: torch.Tensor, partial: bool) -> None:  # dz: (heads, rows, n)
            _product(grad_pq[heads, rows], dz, pk3[heads], False, ctx.scale)
            _product(grad_pk[heads], dz.transpose(1, 2), pq3[heads, rows], partial, ctx.scale)

        grads = _backward(ctx, z, q, k, v, bias, key_real, out, lse, grad_out, grad_w, accumulate if need_policy else None, 4)
        policy = (grad_pq.view_as(pq), grad_pk.view_as(pk)) if need_policy else (None, None)
        return None, *policy, None, *grads, None, None, None, None, None


def _blocks(b: int, h: int, n: int):
    """``(heads, rows)`` slices over the flattened ``b h`` axis and the query axis, heads outer. Whole rows while
    a head's (n, n) fits :data:`_WHOLE_ROWS` (then every block is contiguous and nothing is accumulated);
    a heads slice lies inside one batch element or covers whole ones (so that broadcast operands can be
    sliced, see _View)."""
    rows = _rows(n)
    target = max(1, _BLOCK_ELEMENTS // (rows * n))
    heads = min(b, target // h) * h if target >= h else max(c for c in range(1, h + 1) if h % c == 0 and c <= target)
    for h0 in range(0, b * h, heads):
        for r0 in range(0, n, rows):
            yield slice(h0, h0 + heads), slice(r0, min(n, r0 + rows))


def _rows(n: int) -> int:
    return n if n * n <= _WHOLE_ROWS else min(n, _BLOCK_ROWS)


def _product(target: torch.Tensor, a: torch.Tensor, b: torch.Tensor, accumulate: bool, alpha: float = 1.0) -> None:
    """``target (+)= alpha a @ b`` in place (batched)."""
    if accumulate:
        target.baddbmm_(a, b, alpha=alpha)
    elif alpha != 1.0:
        torch.baddbmm(target, a, b, beta=0.0, alpha=alpha, out=target)
    else:
        torch.bmm(a, b, out=target)


class _View:
    """Per-block views of the operands broadcast to (b, h, n, n) (bias, key padding), for a block over the
    flattened ``b h`` axis: the block's (heads, rows, n) tensors are viewed back as (b', h', rows, n)."""

    def __init__(self, b: int, h: int, bias: torch.Tensor | None, key_f: torch.Tensor | None) -> None:
        self.b, self.h, self.bias, self.key_f = b, h, bias, key_f

    def part(self, extra: torch.Tensor, heads: slice, rows: slice) -> torch.Tensor:
        """``extra`` (broadcastable to (b, h, n, n)) restricted to the block, broadcastable to (b', h', rows, n)."""
        extra = extra.reshape((1,) * (4 - extra.dim()) + tuple(extra.shape))
        count = heads.stop - heads.start
        if count >= self.h:  # whole batch elements
            batch = slice(heads.start // self.h, heads.stop // self.h)
            extra = extra[batch] if extra.shape[0] > 1 else extra
        else:  # some heads of one batch element
            bi, h0 = divmod(heads.start, self.h)
            extra = extra[bi : bi + 1] if extra.shape[0] > 1 else extra
            extra = extra[:, h0 : h0 + count] if extra.shape[1] > 1 else extra
        return extra[:, :, rows] if extra.shape[2] > 1 else extra

    def as4(self, x: torch.Tensor) -> torch.Tensor:
        """(heads, rows, n) -> (b', h', rows, n)."""
        return x.view(-1, min(self.h, x.shape[0]), *x.shape[1:])

    def scores(self, q3: torch.Tensor, k3: torch.Tensor, heads: slice, rows: slice) -> torch.Tensor:
        """``q k^T + bias`` for the block, with ``-max / 2`` on padding keys (so that their ``exp`` is 0)."""
        s = torch.bmm(q3[heads, rows], k3[heads].transpose(1, 2))
        if self.bias is not None:
            self.as4(s).add_(self.part(self.bias, heads, rows))
        if self.key_f is not None:
            self.as4(s).add_(self.part(self.key_f, heads, rows) - 1.0, alpha=torch.finfo(s.dtype).max / 2)
        return s

    def selection(self, z: torch.Tensor, p: torch.Tensor | None, heads: slice, rows: slice, threshold: float) -> torch.Tensor:
        """``p > threshold`` as 0/1 floats, decided as ``z > logit(threshold)`` (no sigmoid), or ``p`` itself
        (soft: ``p`` given), zero on padding keys: (heads, rows, n)."""
        if p is not None:
            sel = p.clone()
        else:  # float 0/1 (a bool then .to(float) costs 8x more)
            sel = torch.gt(z, math.log(threshold / (1.0 - threshold)), out=torch.empty_like(z))
        if self.key_f is not None:
            self.as4(sel).mul_(self.part(self.key_f, heads, rows))
        return sel


def _forward(z, q, k, v, bias, key_real, query_real, soft: bool, threshold: float, want_weights: bool):
    """``out``, the weights (or None), the per-row ``lse_sel`` (b h, n, 1) and the selected count."""
    b, h, n, d = q.shape
    key_f = key_real.to(q.dtype) if not bool(key_real.all()) else None
    query_f = query_real.to(q.dtype).expand(b, h, n, 1).flatten(0, 1)  # (b h, n, 1)
    view = _View(b, h, bias, key_f)
    q3, k3, v3, z3 = (t.flatten(0, 1) for t in (q, k, v, z))
    out = torch.empty_like(v3)
    lse = torch.empty(b * h, n, 1, dtype=q.dtype, device=q.device)
    weights = torch.empty(b * h, n, n, dtype=q.dtype, device=q.device) if want_weights else None
    count = q.new_zeros(())
    for heads, rows in _blocks(b, h, n):
        s = view.scores(q3, k3, heads, rows)  # (heads, rows, n)
        zb = z3[heads, rows]
        hard = view.selection(zb, None, heads, rows, threshold)
        sel = view.selection(zb, torch.sigmoid(zb), heads, rows, threshold) if soft else hard
        row_count = hard.sum(-1, keepdim=True)
        count += (row_count * query_f[heads, rows]).sum()
        m = s.amax(-1, keepdim=True)
        w = s.sub_(m).exp_().mul_(sel)
        total = w.sum(-1, keepdim=True)
        has = sel.amax(-1, keepdim=True) > 0 if soft else row_count > 0
        if bool(has.logical_and_(total == 0).any()):  # all selected terms underflowed
            m, w, total = _anchor_on_selected(view.scores(q3, k3, heads, rows), sel)
        alive = (total > 0).logical_and_(query_f[heads, rows] > 0)
        lse[heads, rows] = torch.where(alive, m + torch.log(torch.where(alive, total, 1.0)), math.inf)
        inv = torch.where(alive, 1.0 / torch.where(alive, total, 1.0), 0.0)
        if weights is not None:
            torch.mul(w, inv, out=weights[heads, rows])
        torch.bmm(w, v3[heads], out=out[heads, rows]).mul_(inv)  # normalise the (rows, d) output, not w
    shape = (b, h, n, n)
    return out.view_as(v), None if weights is None else weights.view(shape), lse, count


def _backward(ctx, z, q, k, v, bias, key_real, out, lse, grad_out, grad_w, on_grad_z: Callable | None, i_q: int = 3):
    """``(dq, dk, dv, dbias)``, recomputing each block; the block's ``dz`` goes to
    ``on_grad_z(heads, rows, dz, partial)``. ``i_q``: the index of ``q`` among the function's inputs (``k``,
    ``v``, ``bias`` follow it)."""
    soft, threshold = ctx.options
    b, h, n, d = q.shape
    needs = ctx.needs_input_grad
    need_q, need_k, need_v, need_bias = needs[i_q : i_q + 4]
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    key_f = key_real.to(q.dtype) if not bool(key_real.all()) else None
    view = _View(b, h, bias, key_f)
    q3, k3, v3, z3, go3 = (t.flatten(0, 1) for t in (q, k, v, z, grad_out))
    gw3 = None if grad_w is None else grad_w.flatten(0, 1)
    delta_all = (go3 * out.flatten(0, 1)).sum(-1, keepdim=True) if gw3 is None else None
    whole = _rows(n) == n  # one block per key range: dk, dv are written once, not accumulated
    dq, (dk, dv) = torch.empty_like(q3), ((torch.empty_like if whole else torch.zeros_like)(t) for t in (k3, v3))
    dbias = None if bias is None or not need_bias else torch.zeros(b * h, n, n, dtype=q.dtype, device=q.device)
    for heads, rows in _blocks(b, h, n):
        e = view.scores(q3, k3, heads, rows).sub_(lse[heads, rows]).clamp_(max=_LOG_GRAD_CAP).exp_()  # exp(s - lse)
        zb = z3[heads, rows]
        p = torch.sigmoid(zb)
        w = view.selection(zb, p if soft else None, heads, rows, threshold).mul_(e)
        dw = torch.bmm(go3[heads, rows], v3[heads].transpose(1, 2))
        if gw3 is not None:
            delta = (dw.add_(gw3[heads, rows]) * w).sum(-1, keepdim=True)
        else:
            delta = delta_all[heads, rows]
        t = dw.sub_(delta)
        if need_v:
            _product(dv[heads], w.transpose(1, 2), go3[heads, rows], not whole)
        ds = w.mul_(t)
        if need_q:
            torch.bmm(ds, k3[heads], out=dq[heads, rows])
        if need_k:
            _product(dk[heads], ds.transpose(1, 2), q3[heads, rows], not whole)
        if dbias is not None:
            dbias[heads, rows] = ds
        if on_grad_z is not None:
            # dz = t e p (1 - p), as sigmoid's own backward (one pass; addcmul_ then mul_ took 4x longer)
            te = t.mul_(e)
            on_grad_z(heads, rows, torch.ops.aten.sigmoid_backward(te, p, grad_input=te), not whole)
    grad_bias = None if dbias is None else dbias.view(b, h, n, n).sum_to_size(bias.shape)
    return (dq.view_as(q) if need_q else None, dk.view_as(k) if need_k else None,
            dv.view_as(v) if need_v else None, grad_bias)


def _anchor_on_selected(s: torch.Tensor, sel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(m, sel * exp(s - m), row sums)`` with ``m`` the largest selected score (rare fallback)."""
    lowest = torch.finfo(s.dtype).min
    m = s.masked_fill(sel == 0, lowest).amax(-1, keepdim=True)
    m = torch.where(m > lowest, m, torch.zeros_like(m))
    w = (s - m).clamp_(max=_EXP_CAP).exp_().mul_(sel)
    return m, w, w.sum(-1, keepdim=True)
