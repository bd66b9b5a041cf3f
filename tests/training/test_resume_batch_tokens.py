"""Resuming with another ``training.batch_tokens`` (set where the checkpoint had none, or the reverse) is
refused like any other changed setting: the batches, hence the run, would differ from the one the checkpoint
continues. (Both were accepted in silence: a ``None`` is left out of the saved config, so it was never
compared.) With the same budget, a resumed run ends with the uninterrupted run's weights."""

from __future__ import annotations

import re

import pytest
import torch

from structattn.training import TrainConfig
from structattn.training.seq2seq import Seq2SeqTrainer
from tests.training.test_fast_bf16 import pairs, tiny_seq2seq


def config(steps: int, batch_tokens: int | None) -> TrainConfig:
    return TrainConfig(max_steps=steps, eval_every=3, warmup_steps=1, batch_size=4, batch_tokens=batch_tokens)


def train(folder, steps: int, batch_tokens: int | None, resume: bool = False) -> Seq2SeqTrainer:
    trainer = Seq2SeqTrainer(tiny_seq2seq(), config(steps, batch_tokens), checkpoint_dir=folder, quiet=True)
    trainer.fit(pairs(), pairs(4, seed=1), resume=folder / "last.pt" if resume else None)
    return trainer


@pytest.mark.parametrize("before, after", [(None, 40), (40, None), (40, 30)])
def test_resuming_with_another_token_budget_is_refused(tmp_path, before, after):
    train(tmp_path, 3, before)
    with pytest.raises(ValueError, match=re.escape(
            f"(training.batch_tokens: checkpoint {before!r}, config {after!r} (None: batches of batch_size "
            "sentences))")):
        train(tmp_path, 6, after, resume=True)


def test_resuming_with_the_same_budget_reaches_the_uninterrupted_weights(tmp_path):
    whole = train(tmp_path / "whole", 6, 40)
    train(tmp_path / "parts", 3, 40)
    resumed = train(tmp_path / "parts", 6, 40, resume=True)
    for (name, a), b in zip(whole.model.state_dict().items(), resumed.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
