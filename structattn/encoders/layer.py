"""One pre-LN Transformer encoder layer."""

from __future__ import annotations

import torch
from torch import nn

from structattn.encoders.dropout import Dropout
from structattn.encoders.self_attention import StructuredSelfAttention
from structattn.structures.structure import Structure


class EncoderLayer(nn.Module):
    """``x + drop(attn(norm(x)))`` then ``x + drop(ffn(norm(x)))`` (pre-LN, Xiong et al., 2020).

    Args:
        attention: the layer's structured self-attention.
        d_model: model width.
        ffn_dim: hidden width of the feed-forward block (GELU).
        dropout: dropout on both residual branches and inside the feed-forward block.

    Shapes:
        x: (b, n, d_model) -> (b, n, d_model); weights (b, h, n, n) when asked for.
    """

    def __init__(self, attention: StructuredSelfAttention, d_model: int, ffn_dim: int, dropout: float) -> None:
        super().__init__()
        self.attention = attention
        self.attention_norm = nn.LayerNorm(d_model)
        self.ffn_norm = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, ffn_dim), nn.GELU(), Dropout(dropout), nn.Linear(ffn_dim, d_model)
        )
        self.dropout = Dropout(dropout)

    def forward(
        self, x: torch.Tensor, structures: dict[str | None, Structure], return_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, weights = self.attention(self.attention_norm(x), structures, return_weights)
        x = x + self.dropout(attended)
        x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        return x, weights
