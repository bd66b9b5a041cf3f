"""A complete outside-the-package extension of structattn, in one file: an attention variant, a structure
provider and a task. Nothing here edits structattn; importing the file registers the three pieces.

    structattn compare examples/compare.gin --import examples/plugin.py --out runs/example
    python -m pytest tests/test_examples.py         # the contract kit on the variant and the provider

* ``gaussian_bias`` (attention, on the shared bias base's ``bias()`` hook): ``score_ij = q_i . k_j / sqrt(d) -
  dist_ij^2 / (2 sigma_h^2)`` with one learned ``sigma_h`` per head (kept positive as ``exp(log_sigma)``);
  keys at distance ``-1`` (unreachable or padding) get no weight; a row with no reachable key outputs zeros.
* ``chain`` (provider): each word linked to the next, so ``distance[i, j] = |i - j|``.
* ``chain_position`` (task): tag each word of the bundled treebank with its position modulo ``modulus``.

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from structattn.attention import BiasedAttention, LearnedQuantity, register_attention
from structattn.structures import GraphProvider, Structure, register_provider
from structattn.tasks.base import register_task
from structattn.tasks.treebank import TreebankTask


@register_attention("gaussian_bias")
class GaussianBiasAttention(BiasedAttention):
    """Scores plus a Gaussian bias of the structural distance, one learned width per head.

    The shared bias base (:class:`~structattn.attention.biased.BiasedAttention`) owns padding, the fused /
    naive / flex paths and the returned weights; this class only says what the bias is (:meth:`bias`) and
    which keys are allowed (:meth:`allowed`).

    Args:
        num_heads: h.
        head_dim: d.
        init_sigma: initial width of every head (> 0), in hops.
        backend: ``"sdpa"`` (fused), ``"naive"`` (eager) or ``"flex"``.

    Shapes:
        q, k, v ``(b, h, n, d)`` -> out ``(b, h, n, d)``, weights ``(b, h, n, n)``; structure.distance
        ``(b, n, n)``.
    """

    requires = frozenset({"distance"})

    def __init__(self, num_heads: int, head_dim: int, init_sigma: float = 2.0, backend: str = "sdpa") -> None:
        super().__init__(num_heads, head_dim)
        if not init_sigma > 0:
            raise ValueError(f"gaussian_bias: init_sigma must be > 0, got {init_sigma}")
        self.backend = self.check_backend(backend)
        self.log_sigma = nn.Parameter(torch.full((num_heads,), math.log(init_sigma)))

    def sigma(self) -> torch.Tensor:
        """Per-head widths ``(h,)``."""
        return self.log_sigma.exp()

    def learned_quantities(self) -> list[LearnedQuantity]:
        """What a run records about this module: the per-head widths, ``(h, 1)``."""
        return [LearnedQuantity("sigma", self.sigma().detach().float()[:, None], ["sigma"])]

    def bias(self, structure: Structure, batch_size: int, num_heads: int, device: torch.device,
             dtype: torch.dtype) -> torch.Tensor:
        """``-dist^2 / (2 sigma_h^2)``, 0 where the distance is -1 (those keys are not allowed). Shapes: (b, h, n, n)."""
        dist = _batched(structure.distance).to(device).clamp(min=0).to(dtype)[:, None]  # (b, 1, n, n)
        sigma = self.sigma().to(device, dtype)[None, :, None, None]  # (1, h, 1, 1)
        return -dist.pow(2) / (2 * sigma.pow(2))

    def allowed(self, structure: Structure, batch_size: int, device: torch.device) -> torch.Tensor:
        """Keys at a known distance (unreachable pairs and padding have -1). Shapes: (b, 1, n, n)."""
        return (_batched(structure.distance).to(device) >= 0)[:, None]


def _batched(distance: torch.Tensor) -> torch.Tensor:
    return distance if distance.dim() == 3 else distance[None]


@register_provider("chain")
class ChainProvider(GraphProvider):
    """Each word linked to the next one: ``distance[i, j] = |i - j|`` (a path graph, undirected)."""

    symmetric = True

    def graph_edges(self, item: Any) -> list[tuple[int, int]]:
        return [(i, i + 1) for i in range(len(item) - 1)]


@register_task("chain_position")
class ChainPosition(TreebankTask):
    """Tag each word with its position modulo ``modulus`` (classes ``0 .. modulus - 1``).

    Args:
        modulus: number of classes (>= 2).
        **treebank: ``source``, ``limit``, ... (see :class:`~structattn.tasks.treebank.TreebankTask`).
    """

    output = "token"

    def __init__(self, modulus: int = 3, **treebank: Any) -> None:
        if modulus < 2:
            raise ValueError(f"task 'chain_position': modulus must be >= 2, got {modulus}")
        super().__init__(**treebank)
        self.modulus = modulus

    @property
    def num_labels(self) -> int:
        return self.modulus

    def label(self, item: Any) -> list[int]:
        self.check(item)
        return [i % self.modulus for i in range(len(item))]
