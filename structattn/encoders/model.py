"""Encoder + task head, reading a :class:`Batch`."""

from __future__ import annotations

import torch
from torch import nn

from structattn.encoders.batch import Batch
from structattn.encoders.encoder import Encoder, EncoderOutput, renamed_flag


class TaskModel(nn.Module):
    """Run the encoder on the tokens, take each word's first token (subword input), apply the head.

    Args:
        encoder: the structured encoder.
        head: a head from :mod:`structattn.encoders.heads`.

    Shapes:
        forward(batch) -> logits: (b, C) sentence, (b, w, C) token, (b, w, w) pair; w = words.
    """

    def __init__(self, encoder: Encoder, head: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head

    def forward(self, batch: Batch) -> torch.Tensor:
        logits, _ = self.run(batch)
        return logits

    def run(self, batch: Batch, return_weights: bool = False, return_bias: bool = False, *,
            return_attention: bool | None = None) -> tuple[torch.Tensor, EncoderOutput]:
        """Logits and the encoder output (attention weights / bias tables when asked for;
        ``return_attention`` is the deprecated name of ``return_weights``)."""
        words, word_mask, out = self.encode_words(batch, renamed_flag(return_weights, return_attention), return_bias)
        return self.head(words, word_mask), out

    def encode_words(self, batch: Batch, return_weights: bool = False, return_bias: bool = False, *,
                     return_attention: bool | None = None) -> tuple[torch.Tensor, torch.Tensor, EncoderOutput]:
        """Each word's hidden state (its first token's), the word mask and the encoder output; no head.

        Shapes:
            words (b, w, d_model), word_mask (b, w).
        """
        out = self.encoder(batch.input_ids, batch.token_mask, batch.structures,
                           return_weights=renamed_flag(return_weights, return_attention), return_bias=return_bias)
        starts, word_mask = batch.word_starts
        words = out.hidden.gather(1, starts[..., None].expand(-1, -1, out.hidden.shape[-1]))  # (b, w, d_model)
        return words, word_mask, out
