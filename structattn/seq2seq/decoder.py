"""The decoder: target embeddings -> pre-LN layers (causal self-attention, cross-attention) -> logits."""

from __future__ import annotations

import math

import torch
from torch import nn

from structattn.encoders.dropout import Dropout
from structattn.seq2seq.cache import DecoderCache
from structattn.seq2seq.layer import DecoderLayer


class Decoder(nn.Module):
    """Token embeddings scaled by ``sqrt(d_model)`` plus positions, layers, a final LayerNorm and the output
    projection (without bias; its weight is the embedding's when ``tie_embeddings``).

    Args:
        embedding: target embedding (``padding_idx`` 0); may be shared with the encoder.
        positions: position module (``forward(n) -> (n, d_model)``) or ``None``.
        layers: the decoder layers.
        dropout: embedding dropout.
        tie_embeddings: use ``embedding.weight`` as the output projection.

    Shapes:
        target_in (B, t) long; memory (M, n, d_model); memory_mask (M, n) bool; returns logits (B, t, V). ``M``
        divides ``B``: hypothesis row ``r`` reads memory row ``r // (B / M)`` (beam search: ``M = b``, ``B = b * beam``).
        With a ``cache``, ``target_in`` holds only the new tokens, at positions ``cache.length`` onwards.
    """

    def __init__(self, embedding: nn.Embedding, positions: nn.Module | None, layers: list[DecoderLayer],
                 dropout: float, tie_embeddings: bool = True) -> None:
        super().__init__()
        self.embedding = embedding
        self.positions = positions
        self.layers = nn.ModuleList(layers)
        self.dropout = Dropout(dropout)
        self.final_norm = nn.LayerNorm(embedding.embedding_dim)
        self.output = nn.Linear(embedding.embedding_dim, embedding.num_embeddings, bias=False)
        if tie_embeddings:
            self.output.weight = embedding.weight

    @property
    def d_model(self) -> int:
        return self.embedding.embedding_dim

    def forward(self, target_in: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                cache: DecoderCache | None = None) -> torch.Tensor:
        return self.output(self.hidden(target_in, memory, memory_mask, cache))

    def hidden(self, target_in: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
               cache: DecoderCache | None = None) -> torch.Tensor:
        """The final-norm hidden states (b, t, d_model), before the output projection."""
        start = 0 if cache is None else cache.length
        t = target_in.shape[1]
        x = self.embedding(target_in) * math.sqrt(self.d_model)  # (b, t, d_model)
        if self.positions is not None:
            x = x + self.positions(start + t)[start:].to(x.dtype)
        x = self.dropout(x)
        for k, layer in enumerate(self.layers):
            x = layer(x, memory, memory_mask, None if cache is None else cache.layers[k])
        if cache is not None:
            cache.length += t
        return self.final_norm(x)

    def new_cache(self) -> DecoderCache:
        """An empty cache for incremental decoding."""
        return DecoderCache.empty(len(self.layers))
