"""The shared base of variants that add a score bias and/or restrict the keys: write a ``bias`` hook (and an
``allowed`` mask if any), the base owns padding, the naive / fused / flex paths and the returned weights.

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim, K buckets.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from structattn.attention.bucket_bias import table_bias_attention
from structattn.attention.flex import flex_dense_bias
from structattn.attention.masking import compute_dtype, naive_attention, sdpa_allowed, sdpa_bias
from structattn.attention.base import StructuredAttention, key_padding
from structattn.structures.structure import Structure

BACKENDS = ("sdpa", "flex", "naive")


class BiasedAttention(StructuredAttention):
    """``out = softmax(q k^T / sqrt(d) + bias) v`` over the allowed real keys, for any ``bias`` a subclass computes.

    A subclass writes ``__init__`` and :meth:`bias` (and optionally :meth:`allowed`, and
    :meth:`bucket_bias` for the fast bucket-table path); everything else comes from here:

    * padding: padded keys never get weight, padded queries output zeros (``StructuredAttention.forward``);
      the bias on pairs with a padded token is ignored (it must be finite);
    * backends (``self.backend``): ``"sdpa"`` (fused ``scaled_dot_product_attention`` with a float mask; with a
      :meth:`bucket_bias`, the bucket-table kernels of :func:`~structattn.attention.bucket_bias.bucket_bias_attention`),
      ``"flex"`` (compiled FlexAttention: CUDA training, CPU inference) and ``"naive"`` (eager, float32 softmax);
    * weights on request (the eager path), rows with no allowed key as zeros, never NaN.

    Class attributes:
        backends: the backends the variant accepts (checked by :meth:`check_backend`).
    """

    backends: ClassVar[tuple[str, ...]] = BACKENDS
    backend: str = "sdpa"

    def check_backend(self, backend: str) -> str:
        """``backend`` when the variant accepts it, else ``ValueError`` naming the variant."""
        if backend not in self.backends:
            who = getattr(self, "name", type(self).__name__)
            raise ValueError(f"{who}: backend must be one of {self.backends}, got {backend!r}")
        return backend

    def bias(
        self, structure: Structure, batch_size: int, num_heads: int, device: torch.device, dtype: torch.dtype
    ) -> torch.Tensor | None:
        """Hook: the additive score bias, float ``(b, 1 or h, n, n)`` in ``dtype`` on ``device``, or ``None``
        (no bias). Values on pairs with a padded token are ignored (keep them finite)."""
        return None

    def allowed(self, structure: Structure, batch_size: int, device: torch.device) -> torch.Tensor | None:
        """Hook: bool ``(b, 1 or h, n, n)``, where each query may attend (a ``-inf`` bias elsewhere), or ``None``
        (every real key). Padding is added by the base."""
        return None

    def bucket_bias(
        self, structure: Structure, batch_size: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Optional fast path: ``(table, index)`` with the bias ``table[..., index]``: table ``(K)`` or ``(h, K)``,
        index ``(b, n, n)`` from :func:`~structattn.attention.bucket_bias.bucket_index` (its two padding codes
        included). ``None``: use :meth:`bias`. Must agree with :meth:`bias` on real pairs."""
        return None

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
        assert structure is not None or not self.requires
        b, _, n, _ = q.shape
        token_mask = key_padding(structure, b, n, q.device)  # (b, n)
        buckets = None if structure is None else self.bucket_bias(structure, b, q.device)
        if buckets is not None:
            table, index = buckets
            return table_bias_attention(q, k, v, table, index, token_mask, self.backend, return_weights)
        bias = None if structure is None else self.bias(structure, b, self.num_heads, q.device, compute_dtype(q.dtype))
        allowed = token_mask[:, None, None, :]  # (b, 1, 1, n): real keys
        extra = None if structure is None else self.allowed(structure, b, q.device)
        if extra is not None:
            allowed = allowed & extra
        if return_weights or self.backend == "naive":
            out, weights = naive_attention(q, k, v, bias=bias, allowed=allowed)
            return out, weights if return_weights else None
        if self.backend == "flex":
            return flex_dense_bias(q, k, v, bias, allowed), None
        if bias is None:
            return sdpa_allowed(q, k, v, allowed), None
        return sdpa_bias(q, k, v, bias, allowed), None
