"""HF settings for comparisons: parsing, re-tokenized data, the TaskModel interface, a few trainer steps."""

from __future__ import annotations

import pytest
import torch

from structattn.experiments import hf_models
from structattn.experiments.run import make_providers, make_task, prepare_data
from structattn.hf import attach
from structattn.training import TrainConfig, Trainer, make_batch
from tests.hf.conftest import tiny_model

TASK = "depth_tagging(limit=30, max_depth=3)"


@pytest.fixture(scope="module")
def prepared():
    task = make_task(TASK)
    providers = make_providers({"dependency"}, {})
    return task, providers, prepare_data(task, providers, {}, quiet=True)


def test_settings_parse_and_name_their_structures():
    assert hf_models.is_hf_setting(' hf(config="tiny_bert")') and not hf_models.is_hf_setting("soft_bias(dependency)")
    assert hf_models.plan_structures('hf(config="tiny_bert", plan="soft_bias(dependency)@0; full")') == {"dependency"}
    assert hf_models.plan_structures('hf(config="tiny_bert")') == set()
    for bad in ('hf("x")', 'hf(config="tiny_bert", path="x")', "hf(plan='full')", 'hf(config="huge")', 'hf(config="tiny_bert", lr=1)'):
        with pytest.raises(ValueError, match="HF setting"):
            hf_models.parse_setting(bad)


def test_missing_model_path_says_how_to_fetch(tmp_path):
    with pytest.raises(FileNotFoundError, match="hf download"):
        hf_models.plan_structures(f'hf(path="{tmp_path / "nowhere"}")')


def test_random_config_fine_tunes_with_the_trainer(prepared):
    task, providers, data = prepared
    setting = 'hf(config="tiny_bert", plan="soft_bias(dependency)@0; full", vocab_size=300)'
    hf_data = hf_models.encode_data(setting, data, providers, quiet=True)
    assert [x.id for x in hf_data.items["train"]] == [x.id for x in data.items["train"]]
    example = hf_data.examples["train"][0]
    assert example.label == data.examples["train"][0].label and example.word_ids[0] is None  # [CLS] first
    model = hf_models.build_model(task, len(hf_data.vocab), setting, providers)
    batch = make_batch(hf_data.examples["train"][:3], task.output)
    logits = model(batch)
    assert logits.shape == (3, max(len(x) for x in data.items["train"][:3]), task.num_labels)
    table = model.hf.encoder.layer[0].attention.self.structattn.variants[0].table
    before = table.detach().clone()
    trainer = Trainer(model, TrainConfig(lr=3e-3, warmup_steps=1, max_steps=4, batch_size=8, eval_every=2, patience=0),
                      task.output, seed=0, quiet=True)
    lrs = {id(p): g["initial_lr"] for g in trainer.optimizer.param_groups for p in g["params"]}
    # the trainer takes the model's groups: new parameters at new_lr, the model's own at training.lr
    assert lrs[id(table)] == 1e-3 and lrs[id(model.hf.embeddings.word_embeddings.weight)] == 3e-3
    result = trainer.fit(hf_data.examples["train"], hf_data.examples["dev"])
    assert result.steps == 4 and not torch.equal(before, table)
    assert set(trainer.evaluate(hf_data.examples["test"], desc="test")) >= {"accuracy", "loss"}


def test_pretrained_path_keeps_its_weights(prepared, tmp_path, tokenizer):
    task, providers, data = prepared
    saved = tiny_model("bert", tokenizer, head="BertForMaskedLM")
    saved.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    setting = f'hf(path="{tmp_path}", plan="hard_mask(dependency)*2 + full*2@1; full")'
    model = hf_models.build_model(task, 2, setting, providers)
    torch.testing.assert_close(model.hf.embeddings.word_embeddings.weight, saved.bert.embeddings.word_embeddings.weight)
    hf_data = hf_models.encode_data(setting, data, providers, quiet=True)
    _, out = model.run(make_batch(hf_data.examples["test"][:2], task.output), return_weights=True)
    assert len(out.attentions) == 2 and model.hf.config._attn_implementation == "structattn_sdpa"
    assert [len(layer.attention.variants) for layer in model.encoder.layers] == [0, 2]


def test_parameter_groups_give_new_parameters_the_higher_rate(tokenizer):
    model = hf_models.HFTaskModel(attach(tiny_model("bert", tokenizer), "soft_bias(dependency)"), torch.nn.Linear(32, 3),
                                  new_lr=1e-3)
    groups = model.parameter_groups(TrainConfig(lr=2e-5, weight_decay=0.01))
    by_id = {id(p): g for g in groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert len(by_id) == len(named) == sum(len(g["params"]) for g in groups)
    assert by_id[id(named["head.weight"])]["lr"] == 1e-3 and by_id[id(named["head.weight"])]["weight_decay"] == 0.01
    table = named["hf.encoder.layer.0.attention.self.structattn.variants.0.table"]
    assert by_id[id(table)]["lr"] == 1e-3 and by_id[id(table)]["weight_decay"] == 0.0
    weight, bias = (named[f"hf.encoder.layer.0.attention.self.query.{k}"] for k in ("weight", "bias"))
    assert by_id[id(weight)]["lr"] == 2e-5 and by_id[id(weight)]["weight_decay"] == 0.01
    assert by_id[id(bias)]["lr"] == 2e-5 and by_id[id(bias)]["weight_decay"] == 0.0


def test_pretrained_lr_sets_the_models_own_weights_rate_apart_from_training_lr(tokenizer):
    model = hf_models.HFTaskModel(attach(tiny_model("bert", tokenizer), "soft_bias(dependency)"), torch.nn.Linear(32, 3),
                                  **hf_models.learning_rates({"new_lr": "0.01", "pretrained_lr": "1e-4"}))
    by_id = {id(p): g["lr"] for g in model.parameter_groups(TrainConfig(lr=1e-3)) for p in g["params"]}
    named = dict(model.named_parameters())
    assert by_id[id(named["hf.encoder.layer.0.attention.self.query.weight"])] == 1e-4  # not training.lr
    assert by_id[id(named["head.weight"])] == 0.01
    assert hf_models.learning_rates({}) == {"new_lr": hf_models.NEW_LR, "pretrained_lr": None}
    with pytest.raises(ValueError, match="pretrained_lr must be > 0, got 0.0"):
        hf_models.HFTaskModel(model.hf, model.head, pretrained_lr=0.0)
    with pytest.raises(ValueError, match="pretrained_lr='fast' is not a number"):
        hf_models.learning_rates({"pretrained_lr": "fast"})


def test_trained_tokenizer_round_trips_through_json(treebank):
    from structattn.hf.tokenizer import train_wordpiece, wordpiece_from_json

    trained = train_wordpiece([s.words for s in treebank[:40]], vocab_size=200)
    again = wordpiece_from_json(trained.backend_tokenizer.to_str())
    assert again.get_vocab() == trained.get_vocab()
    words = treebank[50].words  # not in the training text
    assert again(words, is_split_into_words=True)["input_ids"] == trained(words, is_split_into_words=True)["input_ids"]


def test_eval_data_needs_the_model_folder_or_a_stored_tokenizer(prepared, tmp_path):
    task, providers, data = prepared
    with pytest.raises(ValueError, match="model folder .* is gone"):
        hf_models.evaluation_data(f'hf(path="{tmp_path / "gone"}")', task, data.items, "test", providers)
    with pytest.raises(ValueError, match="holds no tokenizer"):
        hf_models.evaluation_data('hf(config="tiny_bert")', task, data.items, "test", providers, None)
