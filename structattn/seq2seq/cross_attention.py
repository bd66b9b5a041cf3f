"""Multi-head attention from the target tokens to the encoder memory."""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from structattn.attention.masking import sdpa
from structattn.seq2seq.cache import LayerCache


class CrossAttention(nn.Module):
    """Full attention of every target token over the real (unpadded) source tokens.

    The memory's keys and values are projected once per source and kept in the cache while decoding. The target
    rows may outnumber the memory rows: ``B = M * g`` hypotheses in groups of ``g`` consecutive rows per source
    (beam search). Each group then attends as ``g`` queries of one sentence (``(M g) h i d -> M h (g i) d``), so the
    memory's keys and values are neither repeated nor reordered per hypothesis.

    Args:
        d_model: model width.
        num_heads: heads (``d_model`` divisible by it).
        dropout: attention-weight dropout during training.

    Shapes:
        x: (B, t, d_model); memory: (M, n, d_model) with ``M`` dividing ``B``; memory_mask: (M, n) bool, True on
        real source tokens; returns (B, t, d_model).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.num_heads, self.dropout = num_heads, dropout
        self.query = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def memory_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the memory, (b, h, n, d) each."""
        k, v = rearrange(self.kv(memory), "b j (two h d) -> two b h j d", two=2, h=self.num_heads)
        return k, v

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                cache: LayerCache | None = None) -> torch.Tensor:
        if cache is not None and cache.cross_k is not None:
            k, v = cache.cross_k, cache.cross_v
        else:
            k, v = self.memory_kv(memory)
            if cache is not None:
                cache.cross_k, cache.cross_v = k, v
        rows, sources = x.shape[0], k.shape[0]
        if rows % sources:
            raise ValueError(f"{rows} target rows cannot be split into equal groups over {sources} memory rows")
        g = rows // sources  # hypotheses per source
        q = rearrange(self.query(x), "(m g) i (h d) -> m h (g i) d", g=g, h=self.num_heads)
        allowed = memory_mask[:, None, None, :]  # (M, 1, 1, n)
        out = sdpa(q, k, v, attn_mask=allowed, dropout_p=self.dropout if self.training else 0.0)
        return self.out(rearrange(out, "m h (g i) d -> (m g) i (h d)", g=g))
