"""The bf16 training path of speed round 3: ``precision='auto'`` follows the machine (simulated without bf16
units here), the precision used is recorded, tables refuse to mix precisions, and each fast piece (fused AdamW,
the loss that skips padding, token-count batches) computes what the plain path does."""

from __future__ import annotations

import json
import random

import pytest
import torch

from structattn import api
from structattn.experiments import merge
from structattn.experiments.record_checks import stamped
from structattn.experiments.results import group_runs
from structattn.seq2seq import PairExample, Seq2SeqOptions, build_seq2seq, pair_batch
from structattn.encoders import EncoderConfig
from structattn.training import LengthBucketSampler, TrainConfig
from structattn.training import precision as precision_module
from structattn.training.batching import padding_share
from structattn.training.precision import check_one_precision, native_bf16, resolve_precision
from structattn.training.seq2seq import Seq2SeqTrainer

TINY = """
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.max_steps = 2
training.eval_every = 2
training.warmup_steps = 1
training.precision = 'auto'
compare.seeds = [0]
compare.tasks = {'depth': 'depth_tagging(limit=20)'}
compare.settings = {'full': 'full', 'soft': 'soft_bias(dependency)'}
"""


@pytest.fixture
def no_bf16_units(monkeypatch):
    """A CPU without AMX-BF16 or AVX512-BF16 (an older Xeon or EPYC): what torch reports there."""
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)


@pytest.fixture
def bf16_units(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)


def test_auto_is_fp32_on_a_cpu_without_bf16_units(no_bf16_units):
    assert not native_bf16("cpu")
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"  # asked for explicitly: emulated, but honoured
    assert resolve_precision("auto", "meta") == "fp32"


def test_auto_is_bf16_where_the_cpu_has_the_units(bf16_units):
    assert native_bf16("cpu") and resolve_precision("auto", "cpu") == "bf16"


def test_auto_is_a_value_of_the_config_and_part_of_its_fingerprint():
    assert TrainConfig(precision="auto").to_dict()["precision"] == "auto"
    with pytest.raises(ValueError, match=r"one of \['fp32', 'bf16', 'auto'\], got 'AUTO'"):
        resolve_precision("AUTO")


def tiny_seq2seq(seed: int = 0):
    torch.manual_seed(seed)
    config = EncoderConfig(d_model=16, num_layers=1, num_heads=2, ffn_dim=32, dropout=0.0)
    return build_seq2seq(config, Seq2SeqOptions(), "full", 30, 30, {}, 2, 3)


def pairs(n: int = 12, seed: int = 0) -> list[PairExample]:
    g = random.Random(seed)
    return [PairExample([g.randrange(4, 30) for _ in range(g.randint(2, 9))], {},
                        [g.randrange(4, 30) for _ in range(g.randint(1, 9))], f"s{k}") for k in range(n)]


def test_trainer_resolves_auto_and_uses_the_fast_pieces_only_in_bf16(bf16_units):
    fast = Seq2SeqTrainer(tiny_seq2seq(), TrainConfig(precision="auto"), quiet=True)
    assert fast.precision == "bf16" and fast.optimizer.defaults["fused"] is True
    plain = Seq2SeqTrainer(tiny_seq2seq(), TrainConfig(), quiet=True)
    assert plain.precision == "fp32" and not plain.optimizer.defaults["fused"]
    assert isinstance(plain.autocast("cpu"), type(__import__("contextlib").nullcontext()))


def test_trainer_on_a_cpu_without_bf16_units_keeps_the_plain_fp32_path(no_bf16_units):
    trainer = Seq2SeqTrainer(tiny_seq2seq(), TrainConfig(precision="auto"), quiet=True)
    assert trainer.precision == "fp32" and not trainer.optimizer.defaults["fused"]


def test_the_loss_that_skips_padding_equals_the_plain_loss_and_gradients():
    model = tiny_seq2seq().train()
    batch = pair_batch(pairs(), 2, 3)
    assert (batch.target_out == 0).any()  # the batch has padding to skip
    losses, grads = [], []
    for skip in (False, True):
        model.zero_grad()
        loss = model.loss(batch, label_smoothing=0.1, skip_padding=skip)
        loss.backward()
        losses.append(loss.detach())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-6)


def test_fused_adamw_steps_like_the_plain_one():
    """Same gradients in, same parameters out (to float32 rounding). Both optimisers get the gradients of the
    plain model: recomputed on each, the ~1e-9 noise on parameters whose true gradient is zero (key biases)
    would be normalised by Adam into updates of either sign."""
    from structattn.training.loop import make_optimizer

    models = [tiny_seq2seq(), tiny_seq2seq()]
    batch = pair_batch(pairs(), 2, 3)
    optimizers = [make_optimizer(m, TrainConfig(lr=1e-2), fused=f) for m, f in zip(models, (False, True))]
    assert not optimizers[0].defaults["fused"] and optimizers[1].defaults["fused"] is True
    for _ in range(3):
        for optimizer in optimizers:
            optimizer.zero_grad()
        models[0].loss(batch).backward()
        for a, b in zip(models[0].parameters(), models[1].parameters()):
            b.grad = a.grad.clone()
        for optimizer in optimizers:
            optimizer.step()
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert any(not torch.equal(a, p) for a, p in zip(models[0].parameters(), tiny_seq2seq().parameters()))


def test_bf16_training_steps_agree_with_fp32_to_bf16_tolerance(bf16_units):
    losses = {}
    for precision in ("fp32", "auto"):
        trainer = Seq2SeqTrainer(tiny_seq2seq(), TrainConfig(lr=1e-3, warmup_steps=1, precision=precision), quiet=True)
        examples = pairs()
        losses[precision] = []
        for _ in range(3):
            with trainer.autocast("cpu"):
                loss = trainer.model.loss(pair_batch(examples, 2, 3), skip_padding=trainer.precision == "bf16")
            losses[precision].append(float(loss.detach()))
            trainer._update(loss.float())
    assert losses["auto"] != losses["fp32"]
    assert losses["auto"] == pytest.approx(losses["fp32"], rel=0.02)


# -- token-count batches -------------------------------------------------------------------------------------
def varied_lengths(n: int = 500, seed: int = 1) -> list[int]:
    g = random.Random(seed)
    return [max(1, int(g.lognormvariate(3.0, 0.5))) for _ in range(n)]


def test_token_batches_cover_every_example_once_per_epoch_within_the_budget():
    lengths = varied_lengths()
    sampler = LengthBucketSampler(lengths, 32, batch_tokens=600, seed=3)
    for epoch in range(3):
        batches = sampler.batches(epoch)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        assert all(len(b) * max(lengths[i] for i in b) <= 600 for b in batches)
    assert sampler.batches(1) != sampler.batches(0) and sampler.batches(1) == sampler.batches(1)
    sizes = {len(b) for b in sampler.batches(0)}
    assert len(sizes) > 3  # short sentences make bigger batches
    fixed = LengthBucketSampler(lengths, 32, seed=3).batches(0)
    assert padding_share(lengths, sampler.batches(0)) <= padding_share(lengths, fixed) + 0.01
    evaluation = LengthBucketSampler(lengths, 32, batch_tokens=600, shuffle=False).batches()
    assert sorted(i for b in evaluation for i in b) == list(range(len(lengths)))


def test_token_batches_refuse_an_example_over_the_budget():
    with pytest.raises(ValueError, match=r"example 2 has 50 tokens, more than batch_tokens = 40"):
        LengthBucketSampler([3, 4, 50, 5], 2, batch_tokens=40)
    with pytest.raises(ValueError, match=r"batch_tokens must be >= 1"):
        TrainConfig(batch_tokens=0)


def test_padding_share():
    assert padding_share([2, 4], [[0, 1]]) == pytest.approx(0.25)
    assert padding_share([3, 3], [[0], [1]]) == 0.0


def test_batch_tokens_is_left_out_of_the_fingerprint_unless_set():
    assert "batch_tokens" not in TrainConfig().to_dict()
    assert TrainConfig(batch_tokens=4000.0).to_dict()["batch_tokens"] == 4000
    with pytest.raises(ValueError, match="training.batch_tokens must be an integer"):
        TrainConfig(batch_tokens=10.5)


def test_the_seq2seq_trainer_batches_by_tokens():
    trainer = Seq2SeqTrainer(tiny_seq2seq(), TrainConfig(batch_size=4, batch_tokens=40), quiet=True)
    examples = pairs(30)
    batches = trainer._sampler(examples).batches(0)
    lengths = [len(e) + len(e.target_ids) for e in examples]
    assert sorted(i for b in batches for i in b) == list(range(30))
    assert all(len(b) * max(lengths[i] for i in b) <= 40 for b in batches)


# -- records and tables --------------------------------------------------------------------------------------
def test_runs_record_the_precision_they_used_and_tables_refuse_a_mix(tmp_path, no_bf16_units):
    out = tmp_path / "auto"
    records = api.compare(TINY, out, quiet=True, plots=False, threads=1)
    assert {r["precision"] for r in records} == {"fp32"}  # auto on a CPU without bf16 units
    saved = json.loads(next((out / "runs").glob("*.json")).read_text())
    assert saved["precision"] == "fp32"
    last = torch.load(next((out / "runs").glob("*/checkpoints/last.pt")), weights_only=False)
    assert last["precision_used"] == "fp32" and last["train_config"]["precision"] == "auto"
    mixed = [dict(records[0]), {**records[1], "precision": "bf16"}]
    with pytest.raises(ValueError, match=r"different precisions \(bf16: .*soft.* \(1 runs\); fp32: .*full"):
        group_runs(mixed)
    assert check_one_precision(records) == "fp32" and check_one_precision([]) is None
    path = next(p for p in (out / "runs").glob("*.json") if "soft" in p.name)
    path.write_text(json.dumps(stamped({**json.loads(path.read_text()), "precision": "bf16"})))  # a valid bf16 record
    with pytest.raises(ValueError, match=r"trained in bf16 \(001_depth_soft_s0.json\) but .* in fp32 "
                                         r"\(000_depth_full_s0.json\); a comparison's runs need one precision"):
        merge([out], tmp_path / "merged", plots=False)


def test_resuming_auto_where_it_means_another_precision_is_refused(tmp_path, monkeypatch):
    config = TrainConfig(max_steps=2, eval_every=2, warmup_steps=1, batch_size=4, precision="auto")
    monkeypatch.setattr(precision_module, "native_bf16", lambda device="cpu": False)
    Seq2SeqTrainer(tiny_seq2seq(), config, checkpoint_dir=tmp_path, quiet=True).fit(pairs(), pairs(4, seed=1))
    assert torch.load(tmp_path / "last.pt", weights_only=False)["precision_used"] == "fp32"
    monkeypatch.setattr(precision_module, "native_bf16", lambda device="cpu": True)  # the same folder, another CPU
    longer = TrainConfig(max_steps=4, eval_every=2, warmup_steps=1, batch_size=4, precision="auto")
    with pytest.raises(ValueError, match=r"'auto' trained in 'fp32' but means 'bf16' on this machine \(continue it on a "
                                         r"machine where 'auto' means 'fp32'\)"):
        Seq2SeqTrainer(tiny_seq2seq(), longer, checkpoint_dir=tmp_path, quiet=True).fit(
            pairs(), pairs(4, seed=1), resume=tmp_path / "last.pt")


def test_records_written_before_precision_was_recorded_take_it_from_the_folders_config(tmp_path):
    """A bf16 record of the old format (no ``precision`` field) is not read as fp32: merge takes the precision
    from the folder's operative config, so it is refused beside an fp32 run."""
    from structattn.experiments.records import config_precision, read_manifest, read_records

    out = tmp_path / "old"
    api.compare(TINY.replace("'auto'", "'bf16'"), out, quiet=True, plots=False, threads=1)
    for path in (out / "runs").glob("*.json"):
        record = json.loads(path.read_text())
        del record["precision"], record["checksum"]  # the old format: written before both were recorded
        path.write_text(json.dumps(record))
    assert config_precision(out) == "bf16" and config_precision(tmp_path) == "fp32"
    assert {r["precision"] for _, r in read_records(out, read_manifest(out)).values()} == {"bf16"}
