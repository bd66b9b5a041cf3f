"""``ssan``: selective self-attention (Geng et al., ACL 2020, "How Does Selective Mechanism Improve
Self-Attention Networks?").

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import torch
from einops import rearrange
from torch import nn

from structattn.attention.base import ATTENTION, StructuredAttention, key_padding, register_attention
from structattn.structures.structure import Structure

#: Cap on ``s_ij - m_i`` before ``exp`` for *unselected* keys (they only enter the straight-through
#: gradient); selected keys always have ``s_ij - m_i <= 0``. ``exp(80) * n`` stays finite in float32.
_EXP_CAP = 80.0


class _instance_or_class_method:
    """Descriptor: the wrapped function receives the instance when called on one, else the class."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)

    def __get__(self, obj: object, cls: type) -> Callable[..., Any]:
        return functools.partial(self.func, cls if obj is None else obj)


def _as_generator(generator: torch.Generator | int | None) -> torch.Generator:
    """An explicit generator; an int is a seed; ``None`` draws a seed from the global RNG (like weight init)."""
    if isinstance(generator, torch.Generator):
        return generator
    if generator is None:
        generator = int(torch.randint(0, 2**62, (1,)).item())
    if not isinstance(generator, int) or isinstance(generator, bool):
        raise ValueError(f"ssan: generator must be a torch.Generator, an int seed or None, got {generator!r}")
    return torch.Generator().manual_seed(generator)


@register_attention("ssan")
class SelectiveSelfAttention(StructuredAttention):
    """Selective self-attention: a policy network picks, per head and query, the keys to attend to.

    Selector (per head, from the layer input ``H``): ``E = (H W_Q')(H W_K')^T`` (no scaling). Training samples
    a Gumbel-Sigmoid ``p = sigmoid((E + G' - G'') / tau)`` (``G', G''`` independent Gumbel(0, 1) from
    :attr:`generator`) and selects ``p > threshold``; the forward pass is exactly 0/1 and the backward pass
    goes through ``p`` (straight-through). Evaluation drops the noise (``sigmoid(E / tau) > threshold``,
    i.e. ``sigmoid(E) > 0.5`` at the default threshold). ``soft=True`` uses ``p`` itself as the selection.
    Attention is a softmax over the selected keys only::

        alpha_ij = sel_ij exp(s_ij - m_i) / sum_k sel_ik exp(s_ik - m_i),   s = q k^T / sqrt(d) (+ bias)

    with ``m_i`` the largest selected score (detached), so gradients reach the policy through ``sel``.
    Padding keys are never selected. A query row with nothing selected outputs zeros (and an all-zero weight
    row) and passes no gradient. After each call, :attr:`last_selection_rate` holds the fraction of real
    (query, key) pairs whose selection probability exceeded ``threshold``.

    Args:
        num_heads: h.
        head_dim: d (also the per-head width of the policy projections).
        d_model: width of ``hidden`` (default ``num_heads * head_dim``).
        temperature: tau of the Gumbel-Sigmoid (> 0).
        threshold: selection threshold on ``p``, in (0, 1).
        soft: use the (sampled) sigmoid itself instead of the hard selection.
        selection_penalty: weight of :meth:`penalty` (mean selection probability) in the training loss.
        generator: a ``torch.Generator`` or an int seed for the noise (``None`` seeds one from the global RNG).
            The noise is drawn on the generator's device and moved to the input's.
        structure_bias: ``"soft_bias"`` (any registered variant with a ``bias(structure, dtype)`` method)
            to add a structural bias to ``s`` inside the selected set; the instance then requires that
            variant's fields. Check a built module with ``module.check_fields(available)`` (instance
            level); ``SelectiveSelfAttention.check_fields`` on the class checks the plain variant (no field).
        structure_bias_options: keyword options of the bias variant.

    Shapes:
        q, k, v: (b, h, n, d); hidden: (b, n, d_model); out: (b, h, n, d); weights: (b, h, n, n).
    """

    needs_hidden = True

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        d_model: int | None = None,
        temperature: float = 0.5,
        threshold: float = 0.5,
        soft: bool = False,
        selection_penalty: float = 0.0,
        generator: torch.Generator | int | None = None,
        structure_bias: str | None = None,
        structure_bias_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(num_heads, head_dim)
        d_model = num_heads * head_dim if d_model is None else d_model
        if d_model < 1 or not temperature > 0 or not 0 < threshold < 1 or not selection_penalty >= 0:
            raise ValueError(
                f"ssan: need d_model >= 1, temperature > 0, 0 < threshold < 1, selection_penalty >= 0; got "
                f"d_model={d_model}, temperature={temperature}, threshold={threshold}, selection_penalty={selection_penalty}"
            )
        self.d_model, self.temperature, self.threshold = d_model, float(temperature), float(threshold)
        self.soft, self.selection_penalty = bool(soft), float(selection_penalty)
        self.policy_query = nn.Linear(d_model, num_heads * head_dim, bias=False)
        self.policy_key = nn.Linear(d_model, num_heads * head_dim, bias=False)
        self.generator = _as_generator(generator)
        self.last_noise_state: torch.Tensor | None = None
        self.last_selection_rate: torch.Tensor | None = None
        self._last_probability: torch.Tensor | None = None
        self.structure_bias = self._build_bias(structure_bias, structure_bias_options or {})
        if self.structure_bias is not None:
            self.requires = frozenset(type(self).requires | type(self.structure_bias).requires)

    def _build_bias(self, name: str | None, options: dict[str, Any]) -> nn.Module | None:
        if name is None:
            if options:
                raise ValueError(f"ssan: structure_bias_options {sorted(options)} given without structure_bias")
            return None
        bias_cls = ATTENTION.get(name)
        if not callable(getattr(bias_cls, "bias", None)):
            raise ValueError(f"ssan: structure_bias {name!r} has no bias(structure, dtype) method (use 'soft_bias')")
        return bias_cls(num_heads=self.num_heads, head_dim=self.head_dim, **options)

    @_instance_or_class_method
    def check_fields(self_or_cls: Any, available: set[str] | frozenset[str], source: str = "the structure") -> None:
        """Raise ``ValueError`` when ``available`` lacks a required field (the instance's, when called on one)."""
        missing = sorted(set(self_or_cls.requires) - set(available))
        if missing:
            raise ValueError(
                f"attention variant 'ssan' (structure_bias={getattr(self_or_cls, 'structure_bias', None).__class__.__name__}) "
                f"needs structure field(s) {missing}, but {source} provides only {sorted(available)}"
            )

    def penalty(self) -> torch.Tensor:
        """``selection_penalty * mean P(select)`` over the real pairs of the last call (differentiable)."""
        if self._last_probability is None:
            if self.last_selection_rate is None:
                raise RuntimeError("ssan.penalty(): call the module first")
            return self.last_selection_rate.new_zeros(())
        return self.selection_penalty * self._last_probability

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        structure: Structure | None,
        *,
        hidden: torch.Tensor | None,
        return_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        assert hidden is not None
        b, h, n, d = q.shape
        if hidden.shape[-1] != self.d_model:
            raise ValueError(f"ssan: hidden has width {hidden.shape[-1]}, the policy was built for d_model={self.d_model}")
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        real = key_padding(structure, b, n, q.device)  # (b, n)
        energy, logits = self._logits(hidden, work)  # (b, h, n, n): E / tau and (E + G' - G'') / tau
        scores = torch.matmul(q.to(work) * d**-0.5, k.to(work).transpose(-1, -2))  # (b, h, n, n)
        if self.structure_bias is not None:
            assert structure is not None
            scores = scores + self.structure_bias.bias(structure, work)
        weights, count = SelectiveSoftmax.apply(
            logits, scores, real[:, None, None, :], real[:, None, :, None], self.soft, self.threshold
        )
        pairs = real.sum(-1).square().sum() * h
        self.last_selection_rate = count.sum().float() / pairs.clamp(min=1)
        self._last_probability = self._probability(energy, real, pairs) if self.selection_penalty > 0 else None
        out = torch.matmul(weights, v.to(work)).to(q.dtype)
        return out, (weights.to(q.dtype) if return_weights else None)

    def _logits(self, hidden: torch.Tensor, work: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``E / tau`` and the logits: ``(E + G' - G'') / tau`` in training, ``E / tau`` in evaluation, with
        ``E = (H W_Q')(H W_K')^T`` per head."""
        b, n, _ = hidden.shape
        # one fused projection, in float32 even for half inputs so that thresholding E is not decided by rounding
        weight = torch.cat([self.policy_query.weight, self.policy_key.weight]).to(work)
        both = rearrange(nn.functional.linear(hidden.to(work), weight), "b n (two h d) -> two b h n d", two=2, h=self.num_heads)
        energy = torch.matmul(both[0] / self.temperature, both[1].transpose(-1, -2))
        if not self.training:
            return energy, energy
        noise = self._gumbel_difference((b, self.num_heads, n, n), work, hidden.device)
        return energy, torch.add(energy, noise, alpha=1.0 / self.temperature)

    def _gumbel_difference(self, shape: tuple[int, ...], work: torch.dtype, device: torch.device) -> torch.Tensor:
        """``G' - G''`` for two Gumbel(0, 1) draws (``G = -log(-log U)``), drawn in that order from the generator."""
        self.last_noise_state = self.generator.get_state()
        tiny = torch.finfo(work).tiny
        draw = functools.partial(torch.rand, shape, generator=self.generator, dtype=work, device=self.generator.device)
        log_u1, log_u2 = draw().clamp_(min=tiny).log_(), draw().clamp_(min=tiny).log_()
        # -log(-log u1) + log(-log u2) = log(log u2 / log u1)
        return log_u2.div_(log_u1).log_().to(device)

    def _probability(self, energy: torch.Tensor, real: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Mean selection probability over real pairs, from ``energy = E / tau``:
        ``P(sigmoid((E + L) / tau) > t) = sigmoid(E - tau logit t)`` for the logistic ``L = G' - G''``."""
        shift = math.log(self.threshold / (1 - self.threshold))
        prob = torch.sigmoid(self.temperature * (energy - shift))
        mask = (real[:, :, None] & real[:, None, :])[:, None]
        return (prob * mask).sum() / pairs.clamp(min=1)


class SelectiveSoftmax(torch.autograd.Function):
    """Selection and masked softmax in one pass, with the straight-through gradient written out.

    Forward: ``p = sigmoid(z)``; ``sel = p > threshold`` (exactly 0/1) or ``sel = p`` (soft), zero on padding
    keys; ``w = sel * exp(s - m) / sum(sel * exp(s - m))`` with ``m`` the largest selected score (exponents of
    unselected keys, which only carry the straight-through gradient, are capped at 80). Rows of padded
    queries and rows with nothing selected are zero.

    Backward (``u = exp(s - m) / Z`` so that ``w = sel * u``; ``t = dw - sum_j w_j dw_j``):
    ``ds = w * t`` and ``dz = u * t * p * (1 - p)`` (straight-through: ``d sel / d p = 1``). Only
    ``w, u, p`` are kept for the backward pass, instead of a dozen ``(b, h, n, n)`` autograd buffers.

    Shapes:
        z, s: (b, h, n, n); key_real: (b, 1, 1, n); query_real: (b, 1, n, 1). Returns w (b, h, n, n) and the
        number of keys above the threshold per query (b, h, n), as float.
    """

    @staticmethod
    def forward(ctx, z, s, key_real, query_real, soft: bool, threshold: float):  # type: ignore[override]
        p = torch.sigmoid(z)
        above = (p > threshold) & key_real
        sel = p * key_real if soft else above.to(p.dtype)
        lowest = torch.finfo(s.dtype).min
        m = s.masked_fill(sel == 0, lowest).amax(-1, keepdim=True)
        m = torch.where(m > lowest, m, torch.zeros_like(m))
        u = (s - m).clamp_(max=_EXP_CAP).exp_().masked_fill_(~key_real, 0.0)
        w = u * sel
        total = w.sum(-1, keepdim=True)
        keep = (total > 0) & query_real
        inv = torch.where(keep, 1.0 / torch.where(keep, total, torch.ones_like(total)), torch.zeros_like(total))
        w.mul_(inv)
        u.mul_(inv)
        ctx.save_for_backward(w, u, p)
        count = above.sum(-1, dtype=p.dtype) * query_real[..., 0]
        ctx.mark_non_differentiable(count)
        return w, count

    @staticmethod
    def backward(ctx, grad_w, _grad_count):  # type: ignore[override]
        w, u, p = ctx.saved_tensors
        t = grad_w - (grad_w * w).sum(-1, keepdim=True)
        grad_s = w * t
        grad_z = t.mul_(u).mul_(p).mul_(1.0 - p)
        return grad_z, grad_s, None, None, None, None
