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
from structattn.attention.biased import BiasedAttention
from structattn.attention.learned import LearnedQuantity
from structattn.attention.ssan_kernels import PolicySelectiveAttention
from structattn.structures.structure import Structure


SOFT_MODES = ("ours", "original")
PENALTY_FORMS = ("mean_probability", "original")


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

    Selector (per head, from the layer input ``H``): ``E = (H W_Q' + b_Q')(H W_K' + b_K')^T`` (no scaling;
    the biases only with ``policy_bias=True``). Training samples a Gumbel-Sigmoid
    ``p = sigmoid((E + G' - G'') / tau)`` (``G', G''`` independent Gumbel(0, 1); their difference is drawn as
    one standard logistic variate from :attr:`generator`, see :meth:`_noise`) and selects ``p > threshold``;
    the forward pass is exactly 0/1 and the backward pass goes through ``p`` (straight-through). Evaluation
    drops the noise (``sigmoid(E / tau) > threshold``, i.e. ``sigmoid(E) > 0.5`` at the default threshold).
    ``soft=True`` uses a probability itself as the selection (see ``soft_mode``). Attention is a softmax over
    the selected keys only::

        alpha_ij = sel_ij exp(s_ij - m_i) / sum_k sel_ik exp(s_ik - m_i),   s = q k^T / sqrt(d) (+ bias)

    (``m_i`` any per-row shift: it cancels; see ``ssan_kernels.SelectiveAttention`` for the one used), so
    gradients reach the policy through ``sel``. Padding keys are never selected. A query row with nothing
    selected outputs zeros (and an all-zero weight row) and passes no gradient. After each call,
    :attr:`last_selection_rate` holds the fraction of real (query, key) pairs whose selection probability
    exceeded ``threshold``.

    Ours vs the original (Geng et al. 2020, the authors' TensorFlow code, ``thumt/layers/rlattention.py``);
    the defaults are ours, each original behaviour is one option:

    ========================  =====================================  =====================================
    aspect                    ours (default)                         original (option)
    ========================  =====================================  =====================================
    hard selection            ``sigmoid((E + L) / tau) > t``, ST      the same (RelaxedBernoulli(0.5), > 0.5)
    soft selection, training  ``sigmoid((E + L) / tau)`` (noisy)      ``sigmoid(E)``: ``soft_mode="original"``
    soft selection, eval      ``sigmoid(E / tau)`` (soft)             hard ``sigmoid(E / tau) > t``
    policy projections        no bias                                ``policy_bias=True``
    penalty                   ``mean P(select)`` over real pairs     ``penalty_form="original"``: selections
                                                                     summed over heads and keys, averaged
                                                                     over real queries
    entropy term              none (``entropy_weight=0``)            ``entropy_weight * mean(-H(sigmoid E))``
    softmax                   max-subtracted, exact                  ``exp(s) * sel / (sum + 1e-6)`` (kept
                                                                     ours: the original overflows)
    ========================  =====================================  =====================================

    Args:
        num_heads: h.
        head_dim: d (also the per-head width of the policy projections).
        d_model: width of ``hidden`` (default ``num_heads * head_dim``).
        temperature: tau of the Gumbel-Sigmoid (> 0).
        threshold: selection threshold on ``p``, in (0, 1).
        soft: use a selection probability itself instead of the hard selection.
        soft_mode: with ``soft=True``: ``"ours"`` (default: the noisy ``sigmoid((E + L) / tau)`` in training,
            ``sigmoid(E / tau)`` at evaluation) or ``"original"`` (``sigmoid(E)``, no noise nor temperature, in
            training; the hard selection at evaluation).
        policy_bias: give the policy projections a bias (the original's ``linear(..., bias=True)``).
        selection_penalty: weight of the selection term of :meth:`penalty` in the training loss.
        penalty_form: ``"mean_probability"`` (default: mean of ``P(select)`` over real pairs, in closed form)
            or ``"original"`` (the sampled selections summed over heads and real keys, averaged over real
            queries; straight-through gradient; the original counts padded keys too, we do not).
        entropy_weight: weight of the original's entropy term in :meth:`penalty`: the mean over heads and
            real keys, then over real queries, of ``-H(sigmoid(E))`` (its ``nce``); any sign, default 0.
        generator: a ``torch.Generator`` or an int seed for the noise (``None`` seeds one from the global RNG).
            The noise is drawn on the generator's device and moved to the input's.
        structure_bias: ``"soft_bias"`` (any registered :class:`~structattn.attention.biased.BiasedAttention`
            without an ``allowed`` mask, e.g. a user's ``gaussian_bias``) to add its ``bias(...)`` to ``s`` inside the selected set; the instance then requires that
            variant's fields. Check a built module with ``module.check_fields(available)`` (instance
            level); ``SelectiveSelfAttention.check_fields`` on the class checks the plain variant (no field).
        structure_bias_options: keyword options of the bias variant.

    Shapes:
        q, k, v: (b, h, n, d); hidden: (b, n, d_model); out: (b, h, n, d); weights: (b, h, n, n).
    """

    needs_hidden = True
    value_size_may_differ = True  # the selective kernel takes v of any head size (out is (b, h, n, e))

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        d_model: int | None = None,
        temperature: float = 0.5,
        threshold: float = 0.5,
        soft: bool = False,
        soft_mode: str = "ours",
        policy_bias: bool = False,
        selection_penalty: float = 0.0,
        penalty_form: str = "mean_probability",
        entropy_weight: float = 0.0,
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
        self._check_forms(soft, soft_mode, penalty_form, entropy_weight)
        self.d_model, self.temperature, self.threshold = d_model, float(temperature), float(threshold)
        self.soft, self.soft_mode, self.selection_penalty = bool(soft), soft_mode, float(selection_penalty)
        self.penalty_form, self.entropy_weight = penalty_form, float(entropy_weight)
        self.policy_query = nn.Linear(d_model, num_heads * head_dim, bias=policy_bias)
        self.policy_key = nn.Linear(d_model, num_heads * head_dim, bias=policy_bias)
        self.generator = _as_generator(generator)
        self.last_noise_state: torch.Tensor | None = None
        self.last_selection_rate: torch.Tensor | None = None
        self._last_penalty: torch.Tensor | None = None
        self.structure_bias = self._build_bias(structure_bias, structure_bias_options or {})
        if self.structure_bias is not None:
            self.requires = frozenset(type(self).requires | type(self.structure_bias).requires)

    @staticmethod
    def _check_forms(soft: bool, soft_mode: str, penalty_form: str, entropy_weight: float) -> None:
        if soft_mode not in SOFT_MODES:
            raise ValueError(f"ssan: soft_mode must be one of {SOFT_MODES}, got {soft_mode!r}")
        if soft_mode != "ours" and not soft:
            raise ValueError(f"ssan: soft_mode={soft_mode!r} applies to the soft selection only; pass soft=True")
        if penalty_form not in PENALTY_FORMS:
            raise ValueError(f"ssan: penalty_form must be one of {PENALTY_FORMS}, got {penalty_form!r}")
        if not math.isfinite(entropy_weight):
            raise ValueError(f"ssan: entropy_weight must be finite, got {entropy_weight}")

    def _build_bias(self, name: str | None, options: dict[str, Any]) -> nn.Module | None:
        if name is None:
            if options:
                raise ValueError(f"ssan: structure_bias_options {sorted(options)} given without structure_bias")
            return None
        bias_cls = ATTENTION.get(name)
        if not issubclass(bias_cls, BiasedAttention):
            raise ValueError(
                f"ssan: structure_bias {name!r} is not a BiasedAttention (no bias(...) hook); use e.g. 'soft_bias'"
            )
        module = bias_cls(num_heads=self.num_heads, head_dim=self.head_dim, **options)
        if type(module).allowed is not BiasedAttention.allowed:
            raise ValueError(f"ssan: structure_bias {name!r} restricts keys (an allowed mask); only additive biases compose")
        return module

    def learned_quantities(self) -> list[LearnedQuantity]:
        """Those of the structure bias (e.g. ``soft_bias``'s table); nothing without one."""
        return [] if self.structure_bias is None else self.structure_bias.learned_quantities()

    def field_detail(self) -> str:
        """Names the structure bias in missing-field errors (see :meth:`StructuredAttention.check_fields`)."""
        bias = getattr(self.structure_bias, "name", None)
        return f" with structure_bias={bias!r}" if bias else ""

    def penalty(self) -> torch.Tensor:
        """The regulariser of the last call, to add to the training loss (differentiable):
        ``selection_penalty * S + entropy_weight * N``, with ``S`` the mean selection probability over real pairs
        (``penalty_form="mean_probability"``) or the original's per-query sum of sampled selections
        (``"original"``), and ``N`` the original's mean negative entropy (see the class docstring)."""
        if self._last_penalty is None:
            if self.last_selection_rate is None:
                raise RuntimeError("ssan.penalty(): call the module first")
            return self.last_selection_rate.new_zeros(())
        return self._last_penalty

    def _check_inputs(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, structure: Structure | None,
                      hidden: torch.Tensor | None) -> None:
        """The base checks, then the policy's width and at least one token (the selection kernel's blocks)."""
        super()._check_inputs(q, k, v, structure, hidden)
        assert hidden is not None  # needs_hidden: the base refused None
        if hidden.shape[-1] != self.d_model:
            raise ValueError(f"attention 'ssan': hidden has width {hidden.shape[-1]}, expected d_model={self.d_model} "
                             f"(the policy's input width), got hidden {tuple(hidden.shape)}")
        if q.shape[0] == 0 or q.shape[2] == 0:
            raise ValueError(f"attention 'ssan': q, k, v need at least one sentence and one token, got q "
                             f"{tuple(q.shape)} (b, h, n, d)")

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
        # under autocast (training.precision = "bf16") the policy, the Gumbel logits and the selection kernel
        # still run in float32 (their work dtype): only the output returns in q's dtype
        with torch.autocast(device_type=q.device.type, enabled=False):
            return self._attend(q, k, v, structure, hidden=hidden, return_weights=return_weights)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, structure: Structure | None, *,
                hidden: torch.Tensor | None, return_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        assert hidden is not None  # inputs checked by _check_inputs
        b, h, n, d = q.shape
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        real = key_padding(structure, b, n, q.device)  # (b, n)
        soft_original = self.soft and self.soft_mode == "original"
        tau = 1.0 if soft_original and self.training else self.temperature  # the original's soft sigmoid(E)
        pq, pk = self._policy(hidden, work)  # (b, h, n, d)
        noisy = self.training and not soft_original
        noise = self._logistic((b, h, n, n), work, q.device) if noisy else None  # L
        kernel_soft = self.soft and (self.training or not soft_original)  # original soft: hard at evaluation
        # only the penalties need E / tau with a graph (b, h, n, n); the kernel differentiates pq pk^T itself
        energy = torch.matmul(pq, pk.transpose(-1, -2)) * (1.0 / tau) if self._needs_energy() else None
        prob = None
        if self._wants_sampled_sum():
            prob = torch.sigmoid(energy if noise is None else energy + noise * (1.0 / self.temperature))
        z = self._logits(pq, pk, noise, tau)  # (b, h, n, n): (E + L) / tau, no graph
        bias = None
        if self.structure_bias is not None:
            assert structure is not None
            bias = self.structure_bias.bias(structure, b, h, q.device, work)
        out, selected, *weights = PolicySelectiveAttention.apply(
            z, pq, pk, 1.0 / tau, q.to(work) * d**-0.5, k.to(work).contiguous(), v.to(work).contiguous(), bias,
            real[:, None, None, :], real[:, None, :, None], kernel_soft, self.threshold, return_weights,
        )
        pairs = real.sum(-1).square().sum() * h
        self.last_selection_rate = selected.float() / pairs.clamp(min=1)
        self._last_penalty = self._penalty(energy, tau, real, pairs, prob, selected, kernel_soft)
        return out.to(q.dtype), (weights[0].to(q.dtype) if return_weights else None)

    def _needs_energy(self) -> bool:
        return self.selection_penalty > 0 or self.entropy_weight != 0

    def _wants_sampled_sum(self) -> bool:
        return self.penalty_form == "original" and self.selection_penalty > 0

    def _penalty(
        self, energy: torch.Tensor, tau: float, real: torch.Tensor, pairs: torch.Tensor, prob: torch.Tensor | None,
        selected: torch.Tensor, soft: bool,
    ) -> torch.Tensor | None:
        """``selection_penalty * S + entropy_weight * N`` (see :meth:`penalty`), or None when both weights are 0."""
        if self.selection_penalty == 0 and self.entropy_weight == 0:
            return None
        mask = (real[:, :, None] & real[:, None, :])[:, None]  # (b, 1, n, n) real pairs
        queries = real.sum().clamp(min=1)
        total = energy.new_zeros(())
        if self.selection_penalty > 0 and self.penalty_form == "mean_probability":
            total = total + self.selection_penalty * self._probability(energy * tau, real, pairs)
        elif self.selection_penalty > 0:
            assert prob is not None
            summed = (prob * mask).sum()
            if not soft:  # forward: the 0/1 count; backward: straight-through, through the probability
                summed = selected.to(summed.dtype) + (summed - summed.detach())
            total = total + self.selection_penalty * summed / queries
        if self.entropy_weight != 0:
            logits = energy * tau  # E
            neg_entropy = logits * torch.sigmoid(logits) - nn.functional.softplus(logits)  # -H(sigmoid(E))
            per_query = (neg_entropy * mask).sum((1, 3)) / (self.num_heads * real.sum(-1, keepdim=True)).clamp(min=1)
            total = total + self.entropy_weight * (per_query * real).sum() / queries
        return total

    def _policy(self, hidden: torch.Tensor, work: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``H W_Q' + b_Q'`` and ``H W_K' + b_K'`` per head, (b, h, n, d) in ``work`` (float32 even for
        half inputs, so that thresholding ``E = pq pk^T`` is not decided by rounding)."""
        x = hidden.to(work)
        pq, pk = (
            rearrange(
                nn.functional.linear(x, proj.weight.to(work), None if proj.bias is None else proj.bias.to(work)),
                "b n (h d) -> b h n d", h=self.num_heads,
            ).contiguous()
            for proj in (self.policy_query, self.policy_key)
        )
        return pq, pk

    @staticmethod
    def _logits(pq: torch.Tensor, pk: torch.Tensor, noise: torch.Tensor | None, tau: float) -> torch.Tensor:
        """``z = (E + L) / tau`` (or ``E / tau``) without a graph, (b, h, n, n), as one batched ``baddbmm`` (the
        scaling is the gemm's alpha and beta): the noise buffer becomes ``z``, so the layer holds a single
        (b, h, n, n) float tensor of policy logits."""
        pq3, pk3 = pq.detach().flatten(0, 1), pk.detach().flatten(0, 1).transpose(1, 2)
        if noise is None:
            out = torch.empty(pq3.shape[0], pq3.shape[1], pk3.shape[2], dtype=pq.dtype, device=pq.device)
            return torch.baddbmm(out, pq3, pk3, beta=0.0, alpha=1.0 / tau, out=out).view(*pq.shape[:3], -1)
        return noise.view(-1, *noise.shape[2:]).baddbmm_(pq3, pk3, beta=1.0 / tau, alpha=1.0 / tau).view_as(noise)

    def _noise(self, shape: tuple[int, ...], work: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(G' - G'') / tau`` (see :meth:`_logistic`; the layer folds the ``1 / tau`` into :meth:`_logits`) and
        the generator state it was drawn from."""
        noise = self._logistic(shape, work, device)
        return noise.div_(self.temperature), self.last_noise_state

    def _logistic(self, shape: tuple[int, ...], work: torch.dtype, device: torch.device) -> torch.Tensor:
        """``L = G' - G''`` (standard logistic), drawn as one uniform per pair.

        The difference of two independent Gumbel(0, 1) variates is a standard logistic variate, so it is drawn
        as one: ``L = log U - log(1 - U)`` for a single ``U ~ Uniform(0, 1)`` per pair, from the generator
        (its state recorded first). Same distribution as drawing ``G'`` and ``G''`` separately (tested), at half
        the random numbers: on CPU the draw is serial and was the largest elementwise cost of a layer. ``logit``
        runs in place with ``U`` clamped to ``[tiny, 1 - tiny]`` (the upper bound is no bound: ``U < 1``), so the
        draw is the only buffer.
        """
        self.last_noise_state = self.generator.get_state()
        u = torch.rand(shape, generator=self.generator, dtype=work, device=self.generator.device)
        return u.logit_(eps=torch.finfo(work).tiny).to(device)

    def _probability(self, logits: torch.Tensor, real: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Mean selection probability over real pairs, from the policy scores ``logits = E``:
        ``P(sigmoid((E + L) / tau) > t) = sigmoid(E - tau logit t)`` for the logistic ``L = G' - G''``."""
        shift = math.log(self.threshold / (1 - self.threshold))
        prob = torch.sigmoid(logits - self.temperature * shift)
        mask = (real[:, :, None] & real[:, None, :])[:, None]
        return (prob * mask).sum() / pairs.clamp(min=1)
