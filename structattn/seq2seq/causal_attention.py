"""Causal multi-head self-attention of the decoder, with an optional key/value cache."""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from structattn.attention.masking import sdpa
from structattn.seq2seq.cache import LayerCache


class CausalSelfAttention(nn.Module):
    """Each target token attends to itself and the tokens before it (Vaswani et al., 2017, Sec. 3.2.3).

    With a cache, ``x`` holds only the new tokens: their keys and values are appended to the cached ones and
    the new queries attend over all of them, so one decoding step costs O(t) instead of O(t^2).

    Args:
        d_model: model width.
        num_heads: heads (``d_model`` divisible by it).
        dropout: attention-weight dropout during training.

    Shapes:
        x: (b, t_new, d_model) -> (b, t_new, d_model).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.num_heads, self.dropout = num_heads, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        q, k, v = rearrange(self.qkv(x), "b i (three h d) -> three b i h d", three=3, h=self.num_heads)
        past = 0 if cache is None or cache.self_k is None else cache.self_k.shape[1]
        if cache is not None:
            k, v = cache.append(k, v)  # (b, t, h, d): the cache's time-major layout
        q, k, v = (rearrange(z, "b i h d -> b h i d") for z in (q, k, v))  # views: SDPA reads the strides
        drop = self.dropout if self.training else 0.0
        new = q.shape[2]
        if past == 0 or new == 1:  # causal among the new tokens alone, or one query that sees every key
            out = sdpa(q, k, v, is_causal=past == 0 and new > 1, dropout_p=drop)
        else:  # query i sits at position past + i and may see keys 0..past + i
            allowed = torch.ones(new, past + new, dtype=torch.bool, device=x.device).tril(diagonal=past)
            out = sdpa(q, k, v, attn_mask=allowed, dropout_p=drop)
        return self.out(rearrange(out, "b h i d -> b i (h d)"))
