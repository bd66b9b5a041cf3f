"""One pre-LN Transformer decoder layer."""

from __future__ import annotations

import torch
from torch import nn

from structattn.encoders.dropout import Dropout
from structattn.seq2seq.cache import LayerCache
from structattn.seq2seq.causal_attention import CausalSelfAttention
from structattn.seq2seq.cross_attention import CrossAttention


class DecoderLayer(nn.Module):
    """``x + drop(self_attn(norm(x)))``, ``x + drop(cross_attn(norm(x), memory))``, ``x + drop(ffn(norm(x)))``
    (pre-LN, Xiong et al., 2020).

    Args:
        d_model: model width.
        num_heads: heads of both attentions.
        ffn_dim: hidden width of the feed-forward block (GELU).
        dropout: dropout on the residual branches, inside the feed-forward block and on attention weights.

    Shapes:
        x: (B, t, d_model); memory (M, n, d_model); memory_mask (M, n) bool -> (B, t, d_model); ``M`` divides
        ``B`` (groups of ``B / M`` consecutive hypotheses per source, see :class:`CrossAttention`).
    """

    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, dropout: float) -> None:
        super().__init__()
        self.self_attention = CausalSelfAttention(d_model, num_heads, dropout)
        self.cross_attention = CrossAttention(d_model, num_heads, dropout)
        self.self_norm, self.cross_norm, self.ffn_norm = (nn.LayerNorm(d_model) for _ in range(3))
        self.ffn = nn.Sequential(nn.Linear(d_model, ffn_dim), nn.GELU(), Dropout(dropout), nn.Linear(ffn_dim, d_model))
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                cache: LayerCache | None = None) -> torch.Tensor:
        x = x + self.dropout(self.self_attention(self.self_norm(x), cache))
        x = x + self.dropout(self.cross_attention(self.cross_norm(x), memory, memory_mask, cache))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))
