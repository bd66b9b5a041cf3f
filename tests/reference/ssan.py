"""Naive float64 oracle for ``ssan`` (selective self-attention, Geng et al., ACL 2020).

Written from the paper's equations, one query at a time, sharing no code with ``structattn.attention``:

* selector (policy network), per head: ``E = (H W_Q') (H W_K')^T`` (no scaling);
* training: Gumbel-Sigmoid ``p = sigmoid((E + G' - G'') / tau)`` with independent Gumbel(0, 1) noise
  ``G = -log(-log U)``, ``U ~ Uniform(0, 1)``; the action is ``p > threshold`` in the forward pass and the
  straight-through estimator passes the gradient of ``p`` backward; evaluation drops the noise;
  ``soft`` uses ``p`` itself as the selection; with ``soft_mode="original"`` (the authors' TF code) the soft
  selection is ``sigmoid(E)`` in training (no noise, no tau) and the hard one at evaluation;
* ``policy_bias``: the policy projections carry a bias, ``E = (H W_Q' + b_Q')(H W_K' + b_K')^T``;
* attention over the selected keys only: ``alpha_ij = sel_ij exp(s_ij - m_i) / sum_k sel_ik exp(s_ik - m_i)``
  with ``s = q k^T / sqrt(d)`` (+ an optional structure bias) and ``m_i`` the largest selected score
  (any shift gives the same value; it only keeps ``exp`` bounded);
* padding keys are never selected; a row with nothing selected outputs zeros and passes no gradient.

The noise is replayed: the oracle re-creates the module's generator from the state it recorded just before
its last draw (``module.last_noise_state``). The module draws the difference ``G' - G''`` of the two Gumbel
variates as one standard logistic variate (the law of that difference): ``L = log U - log(1 - U)`` from one
``torch.rand((b, h, n, n))`` call; the oracle replays that draw. That the draw has the law of ``G' - G''`` is
checked separately, against explicit Gumbel pairs (tests/attention/test_ssan.py).
"""

from __future__ import annotations

import math
from typing import Callable

import torch


def replay_noise(module: torch.nn.Module, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The logistic noise ``L = G' - G''`` of the module's last training forward (before division by tau)."""
    state = module.last_noise_state if module.last_noise_state is not None else module.generator.get_state()
    gen = torch.Generator(device=module.generator.device)
    gen.set_state(state)
    tiny = torch.finfo(dtype).tiny
    u = torch.rand(shape, generator=gen, dtype=dtype, device=module.generator.device)
    return torch.log(u.clamp(min=tiny)) - torch.log((1 - u).clamp(min=tiny))


def policy_projection(linear: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``x W^T (+ b)`` in float64 (the bias only when the module was built with ``policy_bias=True``)."""
    out = x @ linear.weight.double().T
    return out if linear.bias is None else out + linear.bias.double()


def ssan_reference(
    module: torch.nn.Module,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    token_mask: torch.Tensor | None,
    hidden: torch.Tensor,
    bias_fn: Callable[[], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SSAN attention in float64 with per-query loops.

    Args:
        module: the ``ssan`` module (its policy weights, temperature, threshold, mode and noise state are read).
        token_mask: (b, n) bool or None (no padding).
        bias_fn: returns the structure bias (b or 1, h or 1, n, n) in float64, or None.

    Shapes:
        q, k, v: (b, h, n, d); hidden: (b, n, d_model). Returns out (b, h, n, d), weights (b, h, n, n).
    """
    q, k, v, x = q.double(), k.double(), v.double(), hidden.double()
    b, h, n, d = q.shape
    real = torch.ones(b, n, dtype=torch.bool) if token_mask is None else token_mask.cpu()
    pq = policy_projection(module.policy_query, x).reshape(b, n, h, -1)
    pk = policy_projection(module.policy_key, x).reshape(b, n, h, -1)
    soft_original = module.soft and module.soft_mode == "original"
    noisy = module.training and not soft_original
    if noisy:
        noise = replay_noise(module, (b, h, n, n), torch.float64).to(q.device)
    bias = None if bias_fn is None else bias_fn()
    tau, threshold = float(module.temperature), float(module.threshold)
    out_rows, weight_rows = [], []
    for bi in range(b):
        keys = real[bi].nonzero().flatten().to(q.device)  # padding keys are never selected
        for hi in range(h):
            for i in range(n):
                energy = pk[bi, keys, hi] @ pq[bi, i, hi]  # E_ij over the real keys j
                if noisy:
                    energy = energy + noise[bi, hi, i, keys]
                if soft_original and module.training:  # the original's soft selection: sigmoid(E), no noise, no tau
                    sel = torch.sigmoid(energy)
                else:
                    p = torch.sigmoid(energy / tau)
                    soft = module.soft and not soft_original  # the original evaluates its soft mode hard
                    sel = p if soft else (p > threshold).double() + (p - p.detach())
                scores = (k[bi, hi, keys] @ q[bi, hi, i]) / math.sqrt(d)
                if bias is not None:
                    scores = scores + bias[bi if bias.shape[0] > 1 else 0, hi if bias.shape[1] > 1 else 0, i, keys]
                chosen = sel.detach() > 0
                weights = q.new_zeros(n)
                if bool(real[bi, i]) and bool(chosen.any()):
                    m = scores.detach()[chosen].max()
                    num = sel * torch.exp(scores - m)
                    weights = weights.index_put((keys,), num / num.sum())
                weight_rows.append(weights)
                out_rows.append(weights @ v[bi, hi])
    out = torch.stack(out_rows).reshape(b, h, n, d)
    return out, torch.stack(weight_rows).reshape(b, h, n, n)
