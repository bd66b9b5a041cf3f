"""Task heads on top of the encoder's word-level hidden states.

Every head maps ``(hidden (b, w, d_model), word_mask (b, w))`` to logits whose last axis is the class (or
the candidate key, for pairs), so one cross-entropy with ``ignore_index=-100`` and one argmax-accuracy fit
all heads.
"""

from __future__ import annotations

import torch
from torch import nn

#: the head kinds ``make_head`` builds, one per task output
HEAD_KINDS = ("sentence", "token", "pair")


class SentenceClassifier(nn.Module):
    """Pool the words (``mean``, ``max`` or ``first``) and classify.

    Shapes:
        hidden (b, w, d_model), word_mask (b, w) -> logits (b, num_labels)
    """

    def __init__(self, d_model: int, num_labels: int, pooling: str = "mean", dropout: float = 0.0) -> None:
        super().__init__()
        if pooling not in ("mean", "max", "first"):
            raise ValueError(f"unknown pooling {pooling!r}; known: mean, max, first")
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.classify = nn.Linear(d_model, num_labels)

    def forward(self, hidden: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
        weights = word_mask[..., None].to(hidden.dtype)
        if self.pooling == "mean":
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        elif self.pooling == "max":
            pooled = hidden.masked_fill(~word_mask[..., None], torch.finfo(hidden.dtype).min).amax(1)
        else:
            pooled = hidden[:, 0]
        return self.classify(self.dropout(pooled))


class TokenTagger(nn.Module):
    """A linear classifier per word.

    Shapes:
        hidden (b, w, d_model), word_mask (b, w) -> logits (b, w, num_labels)
    """

    def __init__(self, d_model: int, num_labels: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classify = nn.Linear(d_model, num_labels)

    def forward(self, hidden: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
        return self.classify(self.dropout(hidden))


class PairScorer(nn.Module):
    """Biaffine score of every (query word i, candidate word j) pair (Dozat & Manning, 2017):
    ``s_ij = (W_q h_i)^T (W_k h_j) + u^T h_j``; padded candidates get a finite minimum.

    Shapes:
        hidden (b, w, d_model), word_mask (b, w) -> logits (b, w, w), softmax over the last axis (j)
    """

    def __init__(self, d_model: int, pair_dim: int | None = None) -> None:
        super().__init__()
        pair_dim = pair_dim or d_model
        self.query = nn.Linear(d_model, pair_dim)
        self.key = nn.Linear(d_model, pair_dim)
        self.prior = nn.Linear(d_model, 1, bias=False)

    def forward(self, hidden: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
        scores = torch.einsum("bid,bjd->bij", self.query(hidden), self.key(hidden))
        scores = scores / self.query.out_features**0.5 + self.prior(hidden).transpose(1, 2)
        return scores.masked_fill(~word_mask[:, None, :], -torch.finfo(scores.dtype).max)


def make_head(kind: str, d_model: int, num_labels: int, dropout: float = 0.0) -> nn.Module:
    """The head for a task whose output is ``kind`` (``"sentence"``, ``"token"`` or ``"pair"``)."""
    if kind == "sentence":
        return SentenceClassifier(d_model, num_labels, dropout=dropout)
    if kind == "token":
        return TokenTagger(d_model, num_labels, dropout=dropout)
    if kind == "pair":
        return PairScorer(d_model)
    raise ValueError(f"unknown head kind {kind!r}; known: {', '.join(HEAD_KINDS)}")
