"""``local_global``: sliding-window attention with global tokens (Longformer, Beltagy et al., 2020).

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

import torch

from structattn.attention.base import StructuredAttention, register_attention
from structattn.attention.local_global_kernels import banded_attention, flex_available, flex_local_global
from structattn.structures.structure import Structure

BACKENDS = ("auto", "chunked", "flex")


@register_attention("local_global")
class LocalGlobalAttention(StructuredAttention):
    """Each token attends to its (dilated) window and to the global tokens; global tokens attend everywhere.

    The allowed set is exactly ``structure.dense_distance() >= 0`` of a window structure
    (``window_math.band_distance``): ``|i - j| <= radius * dilation`` with ``dilation | (i - j)``, or ``i`` or
    ``j`` global, both real. Scores ``q k^T / sqrt(d)``, softmax in float32 over the allowed keys. Radius,
    dilation and global tokens are read from the structure (``structure.window_radius``,
    ``structure.dilation``, ``structure.is_global``); the number of global tokens may differ per row.

    Backends:
        ``"chunked"``: blocks of queries against their key windows plus gathered global slots, in slabs, with a
        recomputing custom backward (``local_global_kernels.BandAttention``); time and memory grow linearly
        with n and no ``n x n`` tensor is built (except the weights, when asked for: then plain autograd over
        the blocks, which keeps them, and a dense copy for the output).
        ``"flex"``: ``torch.nn.attention.flex_attention`` with a block mask (compiled). Training on CUDA,
        forward only on CPU (CPU training is refused: use ``"chunked"``).
        ``"auto"`` (default): ``"flex"`` for CUDA tensors when FlexAttention is available, else ``"chunked"``.

    Args:
        num_heads: h.
        head_dim: d.
        backend: one of :data:`BACKENDS`.
        block_size: queries per block of the chunked backend (default ``max(radius, 32)``).

    Shapes:
        q, k, v: (b, h, n, d) -> out (b, h, n, d); weights (b, h, n, n) on request.
    """

    requires = frozenset({"band", "token_mask"})

    def __init__(self, num_heads: int, head_dim: int, backend: str = "auto", block_size: int | None = None) -> None:
        super().__init__(num_heads, head_dim)
        if backend not in BACKENDS:
            raise ValueError(f"local_global: unknown backend {backend!r}; choose one of {BACKENDS}")
        if block_size is not None and block_size < 1:
            raise ValueError(f"local_global: block_size must be >= 1, got {block_size}")
        self.backend = backend
        self.block_size = block_size

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
        assert structure is not None and structure.window_radius is not None
        b, _, n, _ = q.shape
        token_mask = structure.token_mask.to(q.device).expand(b, n)
        is_global = None if structure.is_global is None else structure.is_global.to(q.device).expand(b, n)
        radius, dilation = structure.window_radius, structure.dilation
        if self._use_flex(q, k, v):
            out = flex_local_global(q, k, v, token_mask, is_global, radius, dilation)
            if not return_weights:
                return out, None
            with torch.no_grad():
                _, weights = banded_attention(q, k, v, token_mask, is_global, radius, dilation, self.block_size, True)
            return out, weights
        return banded_attention(q, k, v, token_mask, is_global, radius, dilation, self.block_size, return_weights)

    def _use_flex(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
        if self.backend == "chunked":
            return False
        if self.backend == "auto":
            return q.is_cuda and flex_available()
        if not flex_available():
            raise ValueError("local_global: backend='flex' needs torch.nn.attention.flex_attention (torch >= 2.5)")
        training = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        if not q.is_cuda and training:
            raise ValueError(
                "local_global: backend='flex' runs only the forward pass on CPU (no gradients); "
                "use backend='chunked' for CPU training or call it under torch.no_grad()"
            )
        return True
