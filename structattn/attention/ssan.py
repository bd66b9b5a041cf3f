"""``ssan``: selective self-attention (Geng et al., ACL 2020, "How Does Selective Mechanism Improve
Self-Attention Networks?").

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from einops import rearrange
from torch import nn

from structattn.attention.base import ATTENTION, StructuredAttention, key_padding, register_attention
from structattn.attention.ssan_kernels import SelectiveAttention
from structattn.structures.structure import Structure


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
    a Gumbel-Sigmoid ``p = sigmoid((E + G' - G'') / tau)`` (``G', G''`` independent Gumbel(0, 1); their
    difference is drawn as one standard logistic variate from :attr:`generator`, see :meth:`_noise`) and
    selects ``p > threshold``; the forward pass is exactly 0/1 and the backward pass goes through ``p``
    (straight-through). Evaluation drops the noise (``sigmoid(E / tau) > threshold``,
    i.e. ``sigmoid(E) > 0.5`` at the default threshold). ``soft=True`` uses ``p`` itself as the selection.
    Attention is a softmax over the selected keys only::

        alpha_ij = sel_ij exp(s_ij - m_i) / sum_k sel_ik exp(s_ik - m_i),   s = q k^T / sqrt(d) (+ bias)

    (``m_i`` any per-row shift: it cancels; see ``ssan_kernels.SelectiveAttention`` for the one used), so
    gradients reach the policy through ``sel``. Padding keys are never selected. A query row with nothing
    selected outputs zeros (and an all-zero weight row) and passes no gradient. After each call, :attr:`last_selection_rate` holds the fraction of real
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

    def field_detail(self) -> str:
        """Names the structure bias in missing-field errors (see :meth:`StructuredAttention.check_fields`)."""
        bias = getattr(self.structure_bias, "name", None)
        return f" with structure_bias={bias!r}" if bias else ""

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
        energy = self._energy(hidden, work)  # (b, h, n, n): E / tau
        noise, scratch = self._noise(energy.shape, work, q.device) if self.training else (None, None)
        bias = None
        if self.structure_bias is not None:
            assert structure is not None
            bias = self.structure_bias.bias(structure, work)
        out, weights, selected = SelectiveAttention.apply(
            energy, noise, scratch, q.to(work) * d**-0.5, k.to(work).contiguous(), v.to(work).contiguous(), bias,
            real[:, None, None, :], real[:, None, :, None], self.soft, self.threshold,
        )
        pairs = real.sum(-1).square().sum() * h
        self.last_selection_rate = selected.float() / pairs.clamp(min=1)
        self._last_probability = self._probability(energy, real, pairs) if self.selection_penalty > 0 else None
        return out.to(q.dtype), (weights.to(q.dtype) if return_weights else None)

    def _energy(self, hidden: torch.Tensor, work: torch.dtype) -> torch.Tensor:
        """``E / tau`` with ``E = (H W_Q')(H W_K')^T`` per head, (b, h, n, n) in ``work`` (float32 even for half
        inputs, so that thresholding ``E`` is not decided by rounding)."""
        x = hidden.to(work)
        pq, pk = (
            rearrange(nn.functional.linear(x, proj.weight.to(work)), "b n (h d) -> b h n d", h=self.num_heads).contiguous()
            for proj in (self.policy_query, self.policy_key)
        )
        return torch.matmul(pq.mul_(1.0 / self.temperature), pk.transpose(-1, -2))

    def _noise(self, shape: tuple[int, ...], work: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(G' - G'') / tau`` and a free buffer of the same shape (reused by the kernel for the selection).

        The difference of two independent Gumbel(0, 1) variates is a standard logistic variate, so it is drawn
        as one: ``L = log U - log(1 - U)`` for a single ``U ~ Uniform(0, 1)`` per pair, from the generator
        (its state recorded first). Same distribution as drawing ``G'`` and ``G''`` separately (tested), at half
        the random numbers: on CPU the draw is serial and was the largest elementwise cost of a layer.
        """
        self.last_noise_state = self.generator.get_state()
        tiny = torch.finfo(work).tiny
        u = torch.rand(shape, generator=self.generator, dtype=work, device=self.generator.device)
        rest = torch.rsub(u, 1.0).clamp_(min=tiny)  # 1 - U
        noise = u.clamp_(min=tiny).div_(rest).log_().div_(self.temperature)
        return noise.to(device), rest.to(device)

    def _probability(self, energy: torch.Tensor, real: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Mean selection probability over real pairs, from ``energy = E / tau``:
        ``P(sigmoid((E + L) / tau) > t) = sigmoid(E - tau logit t)`` for the logistic ``L = G' - G''``."""
        shift = math.log(self.threshold / (1 - self.threshold))
        prob = torch.sigmoid(self.temperature * (energy - shift))
        mask = (real[:, :, None] & real[:, None, :])[:, None]
        return (prob * mask).sum() / pairs.clamp(min=1)
