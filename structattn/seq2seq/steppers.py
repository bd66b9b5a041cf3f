"""Step functions for search: the next-token log-probabilities of a batch of hypotheses.

A stepper holds the state of ``B`` hypotheses (source memory, decoded prefix, cache) and offers
``step(last) -> (B, V) log-probabilities`` and ``reorder(index)`` (keep / duplicate rows for beam search).
:class:`CachedStepper` feeds only the newest token through the decoder (O(t) per step);
:class:`RecomputeStepper` runs the decoder over the whole prefix every step (the reference, O(t^2)).
"""

from __future__ import annotations

from typing import Protocol

import torch

from structattn.encoders.batch import Batch
from structattn.seq2seq.model import Seq2SeqModel


class Stepper(Protocol):
    """What :func:`~structattn.seq2seq.search.greedy_search` and ``beam_search`` call."""

    def step(self, last: torch.Tensor) -> torch.Tensor:
        """Log-probabilities (B, V) of the next token after appending ``last`` (B,) to each hypothesis."""

    def reorder(self, index: torch.Tensor) -> None:
        """Keep hypotheses ``index`` (B',) in that order."""


class CachedStepper:
    """Incremental decoding with a key/value cache.

    The encoder memory (and its cross-attention keys/values) is kept once per sentence, not per hypothesis: while
    the hypotheses come in equal groups of consecutive rows of one sentence (what beam search keeps: ``copies``
    rows, or one row before the first step), a reorder copies only the self-attention cache, and the memory only
    when whole sentences leave. Any other reorder falls back to one memory row per hypothesis.

    Args:
        model: the translation model (put in eval mode by the caller).
        source: the source batch (b sentences).
        copies: hypotheses per sentence (the beam size); rows are sentence-major (``b * copies``).
    """

    def __init__(self, model: Seq2SeqModel, source: Batch, copies: int = 1) -> None:
        self.memory, self.memory_mask = model.encode(source)  # (b, n, d_model), (b, n): once per sentence
        self.decoder = model.decoder
        self.group = copies  # hypothesis rows per memory row
        self.cache = model.decoder.new_cache()

    def step(self, last: torch.Tensor) -> torch.Tensor:
        logits = self.decoder(last[:, None], self.memory, self.memory_mask, self.cache)  # (B, 1, V)
        return torch.log_softmax(logits[:, -1].float() if logits.dtype != torch.float64 else logits[:, -1], dim=-1)

    def reorder(self, index: torch.Tensor) -> None:
        self.cache.reorder_target(index)
        source = torch.div(index, self.group, rounding_mode="floor")  # (B',): the memory row of each kept row
        keep, counts = torch.unique_consecutive(source, return_counts=True)
        if bool((counts == counts[0]).all()):  # equal groups of consecutive rows, each reading one sentence
            self.group = int(counts[0])
        else:
            keep, self.group = source, 1
        if keep.numel() != self.memory.shape[0] or not bool((keep == torch.arange(keep.numel(), device=keep.device)).all()):
            self.memory, self.memory_mask = self.memory.index_select(0, keep), self.memory_mask.index_select(0, keep)
            self.cache.reorder_memory(keep)


class RecomputeStepper:
    """Decoding without a cache: every step runs the decoder over the whole prefix and keeps the last logits."""

    def __init__(self, model: Seq2SeqModel, source: Batch, copies: int = 1) -> None:
        memory, memory_mask = model.encode(source)
        self.decoder = model.decoder
        self.memory = memory.repeat_interleave(copies, dim=0)
        self.memory_mask = memory_mask.repeat_interleave(copies, dim=0)
        self.prefix: torch.Tensor | None = None  # (B, t)

    def step(self, last: torch.Tensor) -> torch.Tensor:
        self.prefix = last[:, None] if self.prefix is None else torch.cat([self.prefix, last[:, None]], dim=1)
        logits = self.decoder(self.prefix, self.memory, self.memory_mask)[:, -1]
        return torch.log_softmax(logits if logits.dtype == torch.float64 else logits.float(), dim=-1)

    def reorder(self, index: torch.Tensor) -> None:
        self.memory = self.memory.index_select(0, index)
        self.memory_mask = self.memory_mask.index_select(0, index)
        if self.prefix is not None:
            self.prefix = self.prefix.index_select(0, index)
