"""From subword tokens to words: first-piece states and word-level attention (Clark et al. 2019).

Glossary: b batch, h heads, n tokens (i queries, j keys), w words, d model dim.
"""

from __future__ import annotations

from typing import Sequence

import torch


def piece_matrix(word_ids: Sequence[Sequence[int | None]], n: int) -> torch.Tensor:
    """``P[k, w, t] = 1`` when token ``t`` of sentence ``k`` is a piece of word ``w`` (special tokens and padding
    belong to no word). Shapes: returns (b, w, n) float32, w the most words in the batch."""
    words = max(1 + max((w for w in ids if w is not None), default=-1) for ids in word_ids)
    pieces = torch.zeros(len(word_ids), words, n)
    for k, ids in enumerate(word_ids):
        for t, w in enumerate(ids):
            if w is not None:
                pieces[k, w, t] = 1.0
    return pieces


def word_attention(weights: torch.Tensor, pieces: torch.Tensor) -> torch.Tensor:
    """Word-to-word attention: summed over a word's pieces as keys, averaged over its pieces as queries
    (Clark et al. 2019, "What Does BERT Look At?", section 4.1); special tokens are dropped, so rows may sum to
    less than 1.

    Shapes:
        weights: (b, h, n, n) token attention; pieces: (b, w, n) from :func:`piece_matrix`; returns (b, h, w, w).
    """
    pieces = pieces.to(weights.dtype)
    keys = torch.einsum("bhij,bwj->bhiw", weights, pieces)  # sum over each word's key pieces
    mean = pieces / pieces.sum(-1, keepdim=True).clamp(min=1)
    return torch.einsum("bvi,bhiw->bhvw", mean, keys)  # mean over each word's query pieces


def first_piece_states(hidden: torch.Tensor, pieces: torch.Tensor) -> torch.Tensor:
    """Each word's first piece's state. Shapes: hidden (b, n, d), pieces (b, w, n) -> (b, w, d) (0 on padding)."""
    first = pieces.cumsum(-1).eq(1) & pieces.bool()  # (b, w, n): the first piece only
    return torch.einsum("bwn,bnd->bwd", first.to(hidden.dtype), hidden)
