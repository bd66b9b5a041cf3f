"""Translating many sentences: sorted by length into batches, decoded, returned in input order."""

from __future__ import annotations

import contextlib
from typing import Sequence

import torch

from structattn.progress import progress_bar
from structattn.seq2seq.collate import PairExample, source_batch
from structattn.seq2seq.config import Seq2SeqOptions
from structattn.seq2seq.model import Seq2SeqModel
from structattn.seq2seq.search import beam_search, greedy_search
from structattn.seq2seq.steppers import CachedStepper, RecomputeStepper


@torch.no_grad()
def translate_examples(model: Seq2SeqModel, examples: Sequence[PairExample], options: Seq2SeqOptions, *,
                       beam: int | None = None, batch_size: int = 32, cached: bool = True,
                       device: torch.device | str = "cpu", quiet: bool = True, desc: str = "translate",
                       precision: str = "fp32") -> list[list[int]]:
    """Target ids (no ``<s>``/``</s>``) of every example, in input order.

    Args:
        model: the trained model (set to eval mode here).
        examples: encoded sources (``target_ids`` unused).
        options: length limits and length penalty; ``options.beam`` unless ``beam`` is given.
        beam: beam size (1: greedy search).
        batch_size: sentences per batch; batches hold sentences of similar length (longest first).
        cached: decode with the key/value cache (``False``: recompute the prefix each step, the reference).
        device: where the model runs.
        quiet: no progress bar.
        precision: ``"fp32"``, or ``"bf16"`` to decode under bfloat16 autocast (the model's weights stay as they
            are); ``benchmarks/decode_bf16.py`` measures how many outputs stay equal to fp32's.

    Raises:
        ValueError: another ``precision``.
    """
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"translate_examples: precision must be 'fp32' or 'bf16', got {precision!r}")
    model.eval()
    beam = options.beam if beam is None else beam
    order = sorted(range(len(examples)), key=lambda i: -len(examples[i]))
    out: list[list[int]] = [[] for _ in examples]
    stepper_cls = CachedStepper if cached else RecomputeStepper
    autocast = (torch.autocast(torch.device(device).type, dtype=torch.bfloat16) if precision == "bf16"
                else contextlib.nullcontext())
    with progress_bar(total=len(examples), quiet=quiet, desc=desc, unit="sent") as bar, autocast:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            source = source_batch([examples[i] for i in chunk]).to(device)
            limits = [options.max_length(len(examples[i])) for i in chunk]
            stepper = stepper_cls(model, source, copies=beam)
            if beam == 1:
                hyps = greedy_search(stepper, model.bos_id, model.eos_id, limits)
            else:
                hyps = beam_search(stepper, model.bos_id, model.eos_id, limits, beam, options.length_penalty)
            for i, hyp in zip(chunk, hyps):
                out[i] = hyp
            bar.update(len(chunk))
    return out
