"""A translation batch: the source as an encoder :class:`Batch`, the target shifted for teacher forcing."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from structattn.encoders.batch import Batch


@dataclass
class Seq2SeqBatch:
    """One padded batch of sentence pairs.

    Attributes:
        source: the encoder input (ids, token mask, structures over the source tokens, ids).
        target_in: (b, t) long, ``<s> y_1 .. y_m`` padded with 0.
        target_out: (b, t) long, ``y_1 .. y_m </s>`` padded with 0 (0 is ignored by the loss).
    """

    source: Batch
    target_in: torch.Tensor
    target_out: torch.Tensor

    def __post_init__(self) -> None:
        if self.target_in.shape != self.target_out.shape or self.target_in.shape[0] != self.source.input_ids.shape[0]:
            raise ValueError(
                f"target_in {tuple(self.target_in.shape)} and target_out {tuple(self.target_out.shape)} must both be "
                f"(b, t) with b = {self.source.input_ids.shape[0]} source sentences"
            )

    @property
    def target_mask(self) -> torch.Tensor:
        """(b, t) bool, True on real target positions (those the loss scores)."""
        return self.target_out != 0

    def to(self, device: torch.device | str) -> "Seq2SeqBatch":
        return replace(self, source=self.source.to(device), target_in=self.target_in.to(device),
                       target_out=self.target_out.to(device))
