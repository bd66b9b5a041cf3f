"""The training loop: learning, early stopping, best weights, clipping, seeds, checkpoints and resume."""

import pytest
import torch

from structattn.training import TrainConfig, Trainer, load_checkpoint, save_checkpoint, seed_everything
from tests.training.util import encoded, model


@pytest.fixture(scope="module")
def data():
    return encoded()


def fresh(vocab, seed=0, plan="soft_bias(dependency)@0; full"):
    seed_everything(seed)
    return model(len(vocab), plan)


def test_learns_and_keeps_the_best_weights(data):
    task, vocab, examples = data
    trainer = Trainer(fresh(vocab), TrainConfig(lr=3e-3, warmup_steps=5, max_steps=60, batch_size=8, eval_every=20,
                                                patience=0), task.output, quiet=True)
    result = trainer.fit(examples["train"], examples["dev"])
    assert [h["step"] for h in result.history] == [20, 40, 60] and result.steps == 60
    assert result.history[0]["train_loss"] > result.history[-1]["train_loss"]
    assert result.best_metric > 0.9  # parity of the word number is in the embedding
    assert trainer.evaluate(examples["dev"])["accuracy"] == result.best_metric


def test_early_stopping_when_dev_stops_improving(data):
    task, vocab, examples = data
    config = TrainConfig(lr=0.0, warmup_steps=0, max_steps=100, batch_size=8, eval_every=5, patience=2)
    result = Trainer(fresh(vocab), config, task.output, quiet=True).fit(examples["train"], examples["dev"])
    assert result.stopped_early and result.steps == 15 and result.best_step == 5


def test_gradients_are_clipped(data):
    task, vocab, examples = data
    from structattn.training import make_batch

    def grad_norm(clip):
        trainer = Trainer(fresh(vocab), TrainConfig(clip_norm=clip, max_steps=1), task.output, quiet=True)
        trainer._step(make_batch(examples["train"][:8], task.output))
        return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in trainer.model.parameters() if p.grad is not None]))

    assert grad_norm(0.0) > 0.05
    assert grad_norm(0.01) <= 0.01 + 1e-6


def test_same_seed_same_model_other_seed_other_model(data):
    task, vocab, examples = data
    config = TrainConfig(max_steps=6, batch_size=8, eval_every=3, warmup_steps=2)

    def run(seed):
        trainer = Trainer(fresh(vocab, seed), config, task.output, seed=seed, quiet=True)
        trainer.fit(examples["train"], examples["dev"])
        return torch.cat([p.detach().flatten() for p in trainer.model.parameters()])

    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))


def test_resume_continues_exactly(data, tmp_path):
    """Train 12 steps straight, or 6 steps, stop, and resume to 12 from last.pt: same weights, same history
    (dropout is on, so the random states must be restored too)."""
    task, vocab, examples = data

    def config(steps):
        return TrainConfig(lr=3e-3, max_steps=steps, batch_size=8, eval_every=3, warmup_steps=2, patience=0)

    straight = Trainer(fresh(vocab), config(12), task.output, quiet=True)
    straight.fit(examples["train"], examples["dev"])
    extra = {"config": "training.max_steps = 12", "meta": {"note": "test"}}
    first = Trainer(fresh(vocab), config(6), task.output, quiet=True, checkpoint_dir=tmp_path, checkpoint_extra=extra)
    first.fit(examples["train"], examples["dev"])
    saved = load_checkpoint(tmp_path / "best.pt")
    assert saved["config"] == "training.max_steps = 12" and saved["meta"] == {"note": "test"}
    seed_everything(123)  # resuming must not depend on the state of the process
    second = Trainer(model(len(vocab)), config(12), task.output, quiet=True, checkpoint_dir=tmp_path)
    result = second.fit(examples["train"], examples["dev"], resume=tmp_path / "last.pt")
    for a, b in zip(straight.model.state_dict().values(), second.model.state_dict().values()):
        assert torch.equal(a, b)
    assert result.history == straight.result.history
    with pytest.raises(ValueError, match="resume from last.pt"):
        Trainer(model(len(vocab)), config(12), task.output, quiet=True).fit([], [], resume=tmp_path / "best.pt")


def test_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt' is a text file, not a structattn checkpoint"):
        load_checkpoint(tmp_path / "junk.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.pt' is empty \(0 bytes\), not a checkpoint"):
        load_checkpoint(tmp_path / "empty.pt")
    (tmp_path / "binary.pt").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "binary.pt")
    torch.save({"weights": torch.ones(2)}, tmp_path / "foreign.pt")
    with pytest.raises(ValueError, match="not a structattn checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    path = save_checkpoint(tmp_path / "sub" / "ok.pt", model={"w": torch.ones(2)}, config="x = 1")
    assert load_checkpoint(path)["config"] == "x = 1" and not (tmp_path / "sub" / "ok.pt.tmp").exists()


def test_config_validation():
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        TrainConfig(max_steps=0)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        TrainConfig(lr=-1.0)


def test_divergence_stops_with_the_step_and_the_run(data):
    task, vocab, examples = data
    config = TrainConfig(lr=1e6, warmup_steps=0, max_steps=50, batch_size=8, eval_every=50, patience=0, clip_norm=0.0)
    trainer = Trainer(fresh(vocab), config, task.output, quiet=True, run_id="000_parity_full_s0")
    with pytest.raises(ValueError, match=r"run 000_parity_full_s0: training loss became (nan|inf) at step \d+ "
                                         r"\(lr [0-9.]+e\+0[56]\); lower training.lr"):
        trainer.fit(examples["train"], examples["dev"])
    assert trainer.loop["step"] < 50 and not trainer.result.history  # stopped at once, no evaluation


def test_nan_loss_names_the_step(data, monkeypatch):
    import structattn.training.trainer as trainer_module

    task, vocab, examples = data
    calls = []

    from structattn.training.evaluation import task_loss

    monkeypatch.setattr(trainer_module, "task_loss", lambda logits, labels: (
        calls.append(1) or (task_loss(logits, labels) * (float("nan") if len(calls) == 3 else 1.0))))
    config = TrainConfig(lr=1e-3, warmup_steps=0, max_steps=10, batch_size=8, eval_every=10, patience=0)
    with pytest.raises(ValueError, match="training loss became nan at step 3 "):
        Trainer(fresh(vocab), config, task.output, quiet=True).fit(examples["train"], examples["dev"])


def _flip_tensor_byte(path, entry_suffix="data/0", offset=5):
    """Flip one byte inside the stored bytes of a tensor (zip entry ``.../data/0``), not in any header."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(entry_suffix))
    raw = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len
    assert info.compress_type == zipfile.ZIP_STORED and offset < info.file_size
    raw[start + offset] ^= 0x01
    path.write_bytes(bytes(raw))


def test_a_flipped_byte_in_tensor_data_is_an_error(data, tmp_path):
    task, vocab, examples = data
    config = TrainConfig(max_steps=2, batch_size=8, eval_every=2, warmup_steps=1)
    Trainer(fresh(vocab), config, task.output, quiet=True, checkpoint_dir=tmp_path).fit(examples["train"], examples["dev"])
    path = tmp_path / "last.pt"
    intact = load_checkpoint(path)
    assert intact["checksum"]["algorithm"] == "sha256"
    _flip_tensor_byte(path)
    # torch itself reads the damaged file without complaint: only the checksum catches it
    raw = torch.load(path, weights_only=True)
    assert any(not torch.equal(a, b) for a, b in zip(raw["model"].values(), intact["model"].values()))
    with pytest.raises(ValueError, match="last.pt' is corrupted: its contents hash to sha256"):
        load_checkpoint(path)


def test_checkpoints_without_checksum_still_load_when_version_1(tmp_path):
    torch.save({"format": "structattn-checkpoint", "version": 1, "model": {"w": torch.ones(2)}}, tmp_path / "v1.pt")
    assert torch.equal(load_checkpoint(tmp_path / "v1.pt")["model"]["w"], torch.ones(2))
    torch.save({"format": "structattn-checkpoint", "version": 2, "model": {"w": torch.ones(2)}}, tmp_path / "v2.pt")
    with pytest.raises(ValueError, match="has no checksum"):
        load_checkpoint(tmp_path / "v2.pt")


def test_resume_with_other_settings_is_refused(data, tmp_path):
    """A resumed record must not state a learning rate or seed the checkpoint was not trained with."""
    task, vocab, examples = data

    def trainer(seed=0, **changes):
        config = TrainConfig(**{"lr": 3e-3, "max_steps": 4, "batch_size": 8, "eval_every": 2, "warmup_steps": 1,
                                **changes})
        return Trainer(fresh(vocab), config, task.output, seed=seed, quiet=True, checkpoint_dir=tmp_path,
                       checkpoint_extra={"meta": {"plan": "full", "run_id": "a"}}, run_id="007_x_s0")

    trainer().fit(examples["train"], examples["dev"])
    last = tmp_path / "last.pt"
    with pytest.raises(ValueError, match=r"run 007_x_s0: cannot resume from .*last.pt'.*training.lr: checkpoint "
                                         r"0.003, config 0.01; seed: checkpoint 0, config 5\)"):
        trainer(seed=5, lr=1e-2).fit(examples["train"], examples["dev"], resume=last)
    with pytest.raises(ValueError, match=r"training.precision: checkpoint 'fp32', config 'bf16'"):
        trainer(precision="bf16").fit(examples["train"], examples["dev"], resume=last)
    changed_meta = trainer()
    changed_meta.checkpoint_extra = {"meta": {"plan": "soft_bias(dependency)", "run_id": "b"}}
    with pytest.raises(ValueError, match=r"plan: checkpoint 'full', config 'soft_bias\(dependency\)'"):
        changed_meta.fit(examples["train"], examples["dev"], resume=last)
    # a longer run, other evaluation cadence and patience are fine
    result = trainer(max_steps=6, eval_every=3, patience=2).fit(examples["train"], examples["dev"], resume=last)
    assert result.steps == 6


def test_the_translation_trainer_stops_on_divergence_too(monkeypatch):
    from structattn.training.seq2seq import Seq2SeqTrainer
    from tests.seq2seq.helpers import random_pairs, tiny_model

    net = tiny_model("full")
    real = type(net).loss
    calls = []
    monkeypatch.setattr(type(net), "loss", lambda self, *a: calls.append(1) or real(self, *a) * (
        float("nan") if len(calls) == 2 else 1.0))
    trainer = Seq2SeqTrainer(net, TrainConfig(max_steps=5, batch_size=4, eval_every=5, warmup_steps=0), quiet=True)
    pairs = random_pairs(8)
    with pytest.raises(ValueError, match="training loss became nan at step 2 "):
        trainer.fit(pairs, pairs)


def test_a_gradient_norm_far_above_clip_norm_is_warned_once(data, monkeypatch):
    """Clipping that sets the whole update (norm > 1000x clip_norm: hard ssan on a pretrained model) is a
    stall nobody sees in the loss column; it is warned about once per run, naming the run; ordinary runs are
    not."""
    import warnings

    task, vocab, examples = data
    config = TrainConfig(lr=3e-3, max_steps=3, batch_size=8, eval_every=3, warmup_steps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Trainer(fresh(vocab), config, task.output, quiet=True).fit(examples["train"], examples["dev"])
    assert not [w for w in caught if "before clipping" in str(w.message)]
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: real(*a, **k) * 0 + 5e4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Trainer(fresh(vocab), config, task.output, quiet=True, run_id="003_x_s0").fit(examples["train"],
                                                                                     examples["dev"])
    messages = [str(w.message) for w in caught if "before clipping" in str(w.message)]
    assert len(messages) == 1 and messages[0].startswith("run 003_x_s0: gradient norm 5e+04 before clipping at step 1")


def test_the_history_keeps_each_intervals_gradient_norms_and_clip_factor(data, monkeypatch, tmp_path):
    """A stall from clipping (a few huge gradients scale every update down) shows in the record, not only in
    one warning: each history row holds the median and largest gradient norm before clipping since the last
    row, and the median factor clipping shrank a step by (min(1, clip_norm / norm)); log.csv has them too."""
    import csv

    task, vocab, examples = data
    scripted = iter([0.5, 4.0, 2.0, 10.0])
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_",
                        lambda *a, **k: real(*a, **k) * 0 + next(scripted))  # the real clipping, a scripted norm
    config = TrainConfig(lr=3e-3, max_steps=4, batch_size=8, eval_every=2, warmup_steps=1, clip_norm=1.0)
    result = Trainer(fresh(vocab), config, task.output, quiet=True, checkpoint_dir=tmp_path / "checkpoints").fit(
        examples["train"], examples["dev"])
    stats = [{k: row[k] for k in row if k.startswith("train_") and k != "train_loss"} for row in result.history]
    assert stats == [
        {"train_grad_norm_median": 2.25, "train_grad_norm_max": 4.0, "train_clip_factor_median": 0.625},
        {"train_grad_norm_median": 6.0, "train_grad_norm_max": 10.0, "train_clip_factor_median": pytest.approx(0.3)},
    ]
    with open(tmp_path / "log.csv", newline="") as handle:
        logged = list(csv.DictReader(handle))
    assert [float(r["train_clip_factor_median"]) for r in logged] == pytest.approx([0.625, 0.3])
    unclipped = TrainConfig(lr=3e-3, max_steps=2, batch_size=8, eval_every=2, warmup_steps=1, clip_norm=0.0)
    rows = Trainer(fresh(vocab), unclipped, task.output, quiet=True).fit(examples["train"], examples["dev"]).history
    assert not [k for k in rows[0] if "grad_norm" in k or "clip_factor" in k]  # no norm computed: nothing to say
