"""Encoder (any structured attention plan) + decoder."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from structattn.encoders.batch import Batch
from structattn.encoders.encoder import Encoder
from structattn.seq2seq.batch import Seq2SeqBatch
from structattn.seq2seq.chunked_loss import chunked_cross_entropy
from structattn.seq2seq.decoder import Decoder


class Seq2SeqModel(nn.Module):
    """A translation model whose encoder is a structattn :class:`Encoder`.

    Args:
        encoder: the structured encoder (any plan; its structures come with ``source``).
        decoder: the decoder.
        bos_id, eos_id: target ids of ``<s>`` and ``</s>``.

    Shapes:
        forward(batch) -> logits (b, t, V_target); encode(source) -> memory (b, n, d_model), memory_mask (b, n).
    """

    def __init__(self, encoder: Encoder, decoder: Decoder, bos_id: int, eos_id: int) -> None:
        super().__init__()
        if encoder.d_model != decoder.d_model:
            raise ValueError(f"encoder width {encoder.d_model} differs from decoder width {decoder.d_model}")
        self.encoder, self.decoder = encoder, decoder
        self.bos_id, self.eos_id = bos_id, eos_id

    def encode(self, source: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder memory and its mask (True on real source tokens)."""
        out = self.encoder(source.input_ids, source.token_mask, source.structures)
        return out.hidden, source.token_mask

    def forward(self, batch: Seq2SeqBatch) -> torch.Tensor:
        memory, memory_mask = self.encode(batch.source)
        return self.decoder(batch.target_in, memory, memory_mask)

    def loss(self, batch: Seq2SeqBatch, label_smoothing: float = 0.0, skip_padding: bool = False) -> torch.Tensor:
        """Mean token cross-entropy over real target positions, with label smoothing.

        ``skip_padding``: the bf16 training path's fast loss, the same loss up to float32 rounding. It projects
        only the real target positions onto the vocabulary (the padded ones are ignored by the loss anyway),
        without the padding's share of the largest matrix product of the step, and computes the cross-entropy
        in row chunks that stay in cache (:func:`~structattn.seq2seq.chunked_loss.chunked_cross_entropy`)
        rather than in passes over the whole float32 (rows, V) logits."""
        memory, memory_mask = self.encode(batch.source)
        hidden, target = self.decoder.hidden(batch.target_in, memory, memory_mask), batch.target_out
        if skip_padding:
            real = target != 0
            logits = self.decoder.output(hidden[real])  # (r, V), r real target tokens
            return chunked_cross_entropy(logits, target[real], label_smoothing, ignore_index=0)
        logits = self.decoder.output(hidden)
        return F.cross_entropy(logits.flatten(0, -2).float(), target.flatten(), ignore_index=0,
                               label_smoothing=label_smoothing)
