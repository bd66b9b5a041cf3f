"""Kinds of run are found by registry: a new kind is one new file (here: this test module registers one), and
the orchestration (run.py, compare.py) runs it without knowing it."""

import json
from collections import Counter
from dataclasses import dataclass

import pytest

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, make_task, run_comparison
from structattn.experiments.runners import RUNNERS, Runner, register_runner, runner_for, setting_kind
from structattn.experiments.runners.encoder import EncoderRunner
from structattn.experiments.runners.hf import HFRunner
from structattn.experiments.runners.seq2seq import Seq2SeqRunner
from structattn.training import TrainConfig

SETUP = Setup(EncoderConfig(d_model=16, num_layers=1, num_heads=2, ffn_dim=24, dropout=0.0),
              TrainConfig(max_steps=2, eval_every=1, batch_size=8, warmup_steps=1))


@dataclass
class MajorityData:
    task: object
    items: dict
    checksum: str = "toy"


class Majority(Runner):
    """A toy kind: predicts the most frequent train label of a sentence task (``toy(...)`` settings)."""

    setting = "toy"
    outputs = ("sentence",)

    def structures(self, plan, model):
        return set()

    def prepare(self, task, providers, vocab_options, *, quiet=False, items=None, cache_dir=None):
        return MajorityData(task, items if items is not None else task.splits())

    def check(self, task, plan, setup, providers):
        if plan.replace(" ", "") != "toy()":
            raise ValueError(f"toy takes no options, got {plan!r}")

    def train(self, job):
        labels = [job.data.task.label(x) for x in job.data.items["train"]]
        guess = Counter(labels).most_common(1)[0][0]
        test = job.data.items["test"]
        correct = [int(job.data.task.label(x) == guess) for x in test]
        return {"metrics": {"test_accuracy": sum(correct) / len(correct), "dev_accuracy": 0.0}, "history": [],
                "best_step": 0, "steps": 0, "stopped_early": False, "num_parameters": 0, "bias": [], "heatmap": None,
                "predictions": {"split": "test", "ids": [x.id for x in test], "correct": correct,
                                "total": [1] * len(test)}}

    def evaluate(self, checkpoint, meta, task, items, split, quiet=False):
        raise ValueError("toy runs keep no checkpoints")


@pytest.fixture
def toy_kind():
    register_runner("toy")(Majority)
    yield Majority
    RUNNERS.unregister("toy")


def test_the_registry_picks_the_kind_from_setting_and_task():
    tagging, pairs, sequence = (make_task("depth_tagging(limit=4)"), make_task("head_selection(limit=4)"),
                                make_task("translation_synthetic(train=4, dev=2, test=2)"))
    assert type(runner_for(tagging, "soft_bias(dependency)@0; full")) is EncoderRunner
    assert type(runner_for(pairs, "full")) is EncoderRunner
    assert type(runner_for(tagging, 'hf(config="tiny_bert")')) is HFRunner
    assert type(runner_for(sequence, "hard_mask(dependency)")) is Seq2SeqRunner
    assert setting_kind(' hf(config="tiny_bert")') == "hf" and setting_kind("soft_bias(dependency)") is None
    from structattn.experiments.runners.hf_seq2seq import HFSeq2SeqRunner

    assert type(runner_for(sequence, 'hf(config="tiny_bert")')) is HFSeq2SeqRunner


def test_a_new_kind_is_one_registration_and_runs_through_compare(toy_kind, tmp_path):
    comparison = Comparison.declare({"shift": "ssan_bigram_shift(limit=40)"},
                                    {"toy": "toy()", "full": "full"}, [0], SETUP)
    records = run_comparison(comparison, tmp_path / "out", quiet=True, plots=False)
    toy = next(r for r in records if r["setting"] == "toy")
    assert toy["plan"] == "toy()" and toy["steps"] == 0 and 0.0 < toy["metrics"]["test_accuracy"] < 1.0
    saved = json.loads((tmp_path / "out" / "runs" / f"{toy['run_id']}.json").read_text())
    assert saved["predictions"]["total"] == [1] * len(saved["predictions"]["ids"])
    assert "toy" in (tmp_path / "out" / "results.md").read_text()
    with pytest.raises(ValueError, match="setting 'bad': toy takes no options"):
        Comparison.declare({"shift": "ssan_bigram_shift(limit=40)"}, {"bad": "toy(x=1)"}, [0], SETUP).validate()


def test_a_kind_cannot_take_a_built_in_name(toy_kind):
    with pytest.raises(ValueError, match="kind of run 'hf' is already registered to .*HFRunner"):
        register_runner("hf")(Majority)
