"""Padding encoded sentence pairs into batches (the seq2seq layer's own, as it sits below ``training``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from structattn.encoders.batch import Batch
from structattn.seq2seq.batch import Seq2SeqBatch
from structattn.structures.collate import collate
from structattn.structures.structure import Structure


@dataclass
class PairExample:
    """One encoded sentence pair.

    Attributes:
        input_ids: source token ids.
        structures: source structures by name, over the source tokens.
        target_ids: target token ids without ``<s>`` / ``</s>`` (empty when unknown, e.g. when translating).
        id: sentence id.
    """

    input_ids: list[int]
    structures: dict[str, Structure]
    target_ids: list[int]
    id: str | None = None

    def __len__(self) -> int:
        return len(self.input_ids)


def source_batch(examples: Sequence[PairExample]) -> Batch:
    """The padded source side.

    Shapes:
        input_ids, token_mask (b, n) with n the longest source.
    """
    b, n = len(examples), max(len(e) for e in examples)
    input_ids = torch.zeros(b, n, dtype=torch.long)
    token_mask = torch.zeros(b, n, dtype=torch.bool)
    for k, e in enumerate(examples):
        input_ids[k, : len(e)] = torch.tensor(e.input_ids)
        token_mask[k, : len(e)] = True
    structures = {name: collate([e.structures[name] for e in examples]) for name in examples[0].structures}
    return Batch(input_ids, token_mask, structures, ids=[e.id for e in examples])


def pair_batch(examples: Sequence[PairExample], bos_id: int, eos_id: int) -> Seq2SeqBatch:
    """Source batch plus teacher-forcing targets ``<s> y`` -> ``y </s>``.

    Shapes:
        target_in, target_out (b, t) with t = longest target + 1, padded with 0.
    """
    t = max(len(e.target_ids) for e in examples) + 1
    target_in = torch.zeros(len(examples), t, dtype=torch.long)
    target_out = torch.zeros(len(examples), t, dtype=torch.long)
    for k, e in enumerate(examples):
        target_in[k, : len(e.target_ids) + 1] = torch.tensor([bos_id, *e.target_ids])
        target_out[k, : len(e.target_ids) + 1] = torch.tensor([*e.target_ids, eos_id])
    return Seq2SeqBatch(source_batch(examples), target_in, target_out)
