"""Single runs: subword input with aligned structures, a structure disk cache, a sentence-level task."""

from dataclasses import replace

import pytest
import torch

from structattn.encoders import EncoderConfig
from structattn.experiments import RunSpec, Setup, execute, make_providers, make_task, prepare_data
from structattn.structures.cache import StructureCache
from structattn.training import TrainConfig

SETUP = Setup(EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=2, max_steps=4, batch_size=8, eval_every=2, patience=0),
              structures={"win": "window(radius=2)"}, vocab={"subword_chars": 3})
PLAN = "hard_mask(dependency)*1 + local_global(win)"


def test_subword_run_aligns_structures_to_tokens(tmp_path):
    task = make_task("depth_tagging(limit=20)")
    providers = make_providers(["dependency", "win"], SETUP.structures)
    data = prepare_data(task, providers, SETUP.vocab, quiet=True, cache_dir=str(tmp_path / "cache"))
    item, example = data.items["train"][0], data.examples["train"][0]
    assert len(example) > len(item) and max(w for w in example.word_ids) == len(item) - 1
    dependency = example.structures["dependency"]
    assert dependency.num_tokens == len(example)
    first, second = example.word_ids.index(0), example.word_ids.index(item.heads[0] if item.heads[0] >= 0 else 0)
    assert dependency.adjacency[first, second]  # word 0's first piece sees its head's first piece
    assert example.structures["win"].window_radius == 2 and example.structures["win"].num_tokens == len(example)
    assert any((tmp_path / "cache").rglob(f"*{StructureCache.suffix}"))  # the structures went through the disk cache
    record = execute(RunSpec(0, "depth", "depth_tagging(limit=20)", "split", PLAN, 0), SETUP, data, quiet=True)
    assert record["steps"] == 4
    heat = record["heatmap"]
    assert len(heat["tokens"]) == len(heat["layers"][0]) and any(t.startswith("##") for t in heat["tokens"])


def test_cache_gives_the_same_structures(tmp_path):
    task = make_task("depth_tagging(limit=12)")
    providers = make_providers(["dependency"], {})
    plain = prepare_data(task, providers, {}, quiet=True)
    cold = prepare_data(task, providers, {}, quiet=True, cache_dir=str(tmp_path))
    warm = prepare_data(task, providers, {}, quiet=True, cache_dir=str(tmp_path))
    for a, b, c in zip(plain.examples["test"], cold.examples["test"], warm.examples["test"]):
        assert torch.equal(a.structures["dependency"].distance, b.structures["dependency"].distance)
        assert torch.equal(a.structures["dependency"].distance, c.structures["dependency"].distance)
    assert any(tmp_path.rglob(f"*{StructureCache.suffix}"))


def test_band_variant_on_a_tree_fails_at_build_time():
    from structattn.experiments import build_model

    with pytest.raises(ValueError, match=r"needs structure field\(s\) \['band'\]"):
        build_model(make_task("depth_tagging(limit=4)"), 5, "local_global(dependency)", SETUP.model,
                    make_providers(["dependency"], {}))


def test_sentence_level_task_trains(tmp_path):
    """A sentence task (label: does the sentence end with a period) through the same loop and head."""
    from structattn.tasks.base import Task
    from structattn.tasks.treebank import TreebankTask

    class EndsWithPeriod(TreebankTask):
        name, output = "ends_with_period", "sentence"

        def label(self, item):
            return int(item.words[-1] == ".")

        @property
        def num_labels(self):
            return 2

    task = EndsWithPeriod(limit=40)
    assert isinstance(task, Task)
    providers = make_providers(["dependency"], {})
    data = prepare_data(task, providers, {}, quiet=True)
    setup = replace(SETUP, vocab={}, training=replace(SETUP.training, max_steps=12, eval_every=4))
    record = execute(RunSpec(0, "period", "-", "tree", "soft_bias(dependency)", 0), setup, data, quiet=True)
    assert 0.0 <= record["metrics"]["test_accuracy"] <= 1.0 and record["metrics"]["majority_baseline"] > 0.5
    assert record["history"][-1]["train_loss"] < record["history"][0]["train_loss"]
