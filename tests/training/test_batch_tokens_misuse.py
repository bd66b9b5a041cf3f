"""``training.batch_tokens`` smaller than a training sentence: refused naming the sentence by its id (not only
its position in the shuffled-to-be list), its token count, how many others are over, and the least budget that
takes them all."""

from __future__ import annotations

import re

import pytest

from structattn import api
from structattn.training import LengthBucketSampler, TrainConfig
from structattn.training.seq2seq import Seq2SeqTrainer
from tests.training.test_fast_bf16 import pairs, tiny_seq2seq

TINY = """
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.max_steps = 2
training.eval_every = 2
training.warmup_steps = 1
training.batch_tokens = 6
compare.seeds = [0]
compare.tasks = {'depth': 'depth_tagging(limit=20)'}
compare.settings = {'full': 'full'}
"""


def test_the_sampler_names_the_longest_example_by_id_and_the_least_budget():
    with pytest.raises(ValueError, match=re.escape(
            "sentence 'c' (example 2) has 50 tokens, more than batch_tokens = 40 (1 other example(s) are over it "
            "too): raise batch_tokens to at least 50, or leave such examples out of the data")):
        LengthBucketSampler([3, 45, 50, 5], 2, batch_tokens=40, ids=["a", "b", "c", "d"])
    with pytest.raises(ValueError, match=re.escape("example 2 has 50 tokens, more than batch_tokens = 40:")):
        LengthBucketSampler([3, 4, 50, 5], 2, batch_tokens=40)  # no ids: the index alone


def test_the_seq2seq_trainer_names_the_pair_by_its_id():
    examples = pairs(30)
    lengths = [len(e) + len(e.target_ids) for e in examples]  # a pair's length: source + target tokens
    budget = sorted(lengths)[-3]
    over = [k for k, n in enumerate(lengths) if n > budget]
    longest = max(range(30), key=lambda k: (lengths[k], -k))
    trainer = Seq2SeqTrainer(tiny_seq2seq(), TrainConfig(batch_size=4, batch_tokens=budget), quiet=True)
    with pytest.raises(ValueError, match=re.escape(
            f"sentence {examples[longest].id!r} (example {longest}) has {lengths[longest]} tokens, more than "
            f"batch_tokens = {budget}{f' ({len(over) - 1} other example(s) are over it too)' if len(over) > 1 else ''}"
            f": raise batch_tokens to at least {lengths[longest]}")):
        trainer._sampler(examples)


def test_compare_with_a_budget_below_a_training_sentence_names_it(tmp_path):
    config = tmp_path / "tiny.gin"
    config.write_text(TINY)
    with pytest.raises(ValueError, match=r"^sentence '[^']+' \(example \d+\) has \d+ tokens, more than "
                                         r"batch_tokens = 6 \(\d+ other example\(s\) are over it too\): raise "
                                         r"batch_tokens to at least \d+"):
        api.compare(str(config), tmp_path / "out", quiet=True, plots=False, threads=1)
