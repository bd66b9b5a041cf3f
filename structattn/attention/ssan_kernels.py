"""The fused selection kernel behind ``ssan`` (private to that variant).

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

import math

import torch

#: Cap on ``s_ij - m_i`` before ``exp`` in the rare fallback that anchors on the largest *selected* score
#: (unselected keys then only enter the straight-through gradient); ``exp(80) * n`` stays finite in float32.
_EXP_CAP = 80.0
#: Cap on ``s_j - lse_sel`` (log-space) in the straight-through policy gradient ``r`` (see
#: :class:`SelectiveAttention`): an unselected key scoring more than 30 above the selected set's log-sum-exp
#: would otherwise get a gradient ``exp(s_j - lse_sel)`` beyond what float32 can square (Adam, clipping).
_LOG_GRAD_CAP = 30.0
_GRAD_CAP = math.exp(_LOG_GRAD_CAP)


class SelectiveAttention(torch.autograd.Function):
    """Scores, selection, masked softmax and ``w @ v`` in one function, with the straight-through gradient
    written out (fewer ``(b, h, n, n)`` buffers than autograd would keep or allocate).

    Forward: ``s = q k^T (+ bias)`` (``q`` already scaled by ``1 / sqrt(d)``); ``p = sigmoid(z)`` with
    ``z = energy + noise`` (training: the noise buffer is overwritten with ``p``) or ``z = energy`` (no noise);
    ``sel = p > threshold`` (exactly 0/1) or ``sel = p`` (soft), zero on padding keys;
    ``w = sel * exp(s - m) / sum(sel * exp(s - m))``; ``out = w @ v``. ``m`` is the largest score over the real
    keys, so every exponent is ``<= 0`` (no overflow, and the unselected keys' exponents, which the
    straight-through gradient needs, are exact). Should all selected terms of a row underflow (selected scores
    ~87 below an unselected one in float32), the rows are recomputed with ``m`` the largest *selected* score
    (unselected exponents then capped at 80). Rows of padded queries and rows with nothing selected are zero
    and pass no gradient.

    Backward, with ``dw = dout v^T`` and ``t = dw - rowsum(dw * w)`` (``= dw - rowsum(dout * out)`` when ``w``
    itself gets no gradient): ``ds = w * t`` (-> ``dq = ds k``, ``dk = ds^T q``, ``dbias``), ``dv = w^T dout``
    and ``dz = t * r`` with ``r = exp(s - m) / Z * p (1 - p) = exp(s - lse_sel) p (1 - p)`` (straight-through:
    ``d sel / d p = 1``; ``lse_sel = m + log Z`` the log-sum-exp of the selected scores), the exponent capped at
    :data:`_LOG_GRAD_CAP` (only unselected keys scoring far above every selected one reach it).
    Only ``w`` and ``r`` are kept at ``(b, h, n, n)`` size.

    Shapes:
        energy, noise, scratch: (b, h, n, n) (``scratch``: a free buffer for the selection, or None);
        q, k, v: (b, h, n, d); bias: broadcastable to (b, h, n, n) or None;
        key_real: (b, 1, 1, n); query_real: (b, 1, n, 1). Returns out (b, h, n, d), w (b, h, n, n) and the
        number of (real query, real key) pairs above the threshold (a 0-d tensor).
    """

    @staticmethod
    def forward(ctx, energy, noise, scratch, q, k, v, bias, key_real, query_real, soft: bool, threshold: float):  # type: ignore[override]
        # in-place ops, reused buffers and float 0/1 masks: on CPU a fresh (b, h, n, n) buffer (page faults)
        # or a bool where/masked_fill costs several times a float multiply
        ctx.set_materialize_grads(False)  # no zero-filled gradient for an unused ``w`` output
        key_f = key_real.to(q.dtype) if not bool(key_real.all()) else None
        query_f = query_real.to(q.dtype)
        s = _scores(q, k, bias, key_f)
        p = torch.sigmoid(energy) if noise is None else noise.add_(energy).sigmoid_()  # noise buffer consumed
        hard = torch.gt(p, threshold, out=torch.empty_like(p) if scratch is None else scratch)
        if key_f is not None:
            hard.mul_(key_f)
        count = hard.sum(-1, keepdim=True)
        sel = (p if key_f is None else p * key_f) if soft else hard
        has = (sel > 0).any(-1, keepdim=True) if soft else count > 0
        e = s.sub_(s.amax(-1, keepdim=True)).exp_()
        w = hard.mul_(e) if not soft else torch.mul(e, sel, out=hard)  # the selection buffer becomes w
        total = w.sum(-1, keepdim=True)
        if bool((has & (total == 0)).any()):  # every selected term underflowed: anchor on the selected max
            if not soft:  # the selection buffer now holds w: recompute the selection from p
                sel = torch.gt(p, threshold).to(p.dtype) if key_f is None else torch.gt(p, threshold).to(p.dtype) * key_f
            e, w, total = _anchor_on_selected(q, k, bias, key_f, sel)
        inv = torch.where(total > 0, 1.0 / torch.where(total > 0, total, 1.0), 0.0) * query_f
        w.mul_(inv)
        out = torch.matmul(w, v)
        # r = exp(s - lse_sel) p (1 - p), lse_sel the log-sum-exp over the selected keys: e * inv is that
        # exponential (e <= 1, inv <= 1 / tiny: no overflow), capped at exp(_LOG_GRAD_CAP) for unselected keys
        # scoring far above the selected ones (|q|, |k| ~ 1e3 gave policy gradients ~1e36, whose squares overflow)
        r = (
            e.mul_(inv).clamp_(max=_GRAD_CAP).mul_(p.addcmul_(p, p, value=-1.0)) if ctx.needs_input_grad[0] else None
        )
        ctx.save_for_backward(w, r, q, k, v, out)
        ctx.bias_shape = None if bias is None else bias.shape
        selected = (count * query_f).sum()
        ctx.mark_non_differentiable(selected)
        return out, w, selected

    @staticmethod
    def backward(ctx, grad_out, grad_w, _grad_count):  # type: ignore[override]
        w, r, q, k, v, out = ctx.saved_tensors
        need_z, _, _, need_q, need_k, need_v, need_bias = ctx.needs_input_grad[:7]
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        dw = torch.matmul(grad_out, v.transpose(-1, -2))
        if grad_w is not None:
            delta = (dw.add_(grad_w) * w).sum(-1, keepdim=True)
        else:
            delta = (grad_out * out).sum(-1, keepdim=True)
        t = dw.sub_(delta)
        grad_v = torch.matmul(w.transpose(-1, -2), grad_out) if need_v else None
        grad_q = grad_k = grad_bias = None
        if need_q or need_k or need_bias:
            ds = w * t
            grad_q = torch.matmul(ds, k) if need_q else None
            grad_k = torch.matmul(ds.transpose(-1, -2), q) if need_k else None
            grad_bias = ds.sum_to_size(ctx.bias_shape) if need_bias else None
        grad_z = t.mul_(r) if need_z else None
        return grad_z, None, None, grad_q, grad_k, grad_v, grad_bias, None, None, None, None


def _scores(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None, key_f: torch.Tensor | None) -> torch.Tensor:
    """``q k^T + bias``, with ``-max / 2`` added on padding keys (``key_f`` 0) so that their ``exp`` is 0."""
    s = torch.matmul(q, k.transpose(-1, -2))
    if bias is not None:
        s.add_(bias)
    if key_f is not None:
        s.add_((key_f - 1.0) * (torch.finfo(s.dtype).max / 2))
    return s


def _anchor_on_selected(
    q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None, key_f: torch.Tensor | None, sel: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(exp(s - m), sel * exp(s - m), row sums)`` with ``m`` the largest selected score (rare fallback)."""
    s = _scores(q, k, bias, key_f)
    lowest = torch.finfo(s.dtype).min
    m = s.masked_fill(sel == 0, lowest).amax(-1, keepdim=True)
    e = (s - torch.where(m > lowest, m, torch.zeros_like(m))).clamp_(max=_EXP_CAP).exp_()
    w = e * sel
    return e, w, w.sum(-1, keepdim=True)
