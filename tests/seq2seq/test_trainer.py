"""The translation trainer: loss goes down, resume from last.pt continues exactly, best weights are kept."""

import torch

from structattn.training import TrainConfig, seed_everything
from structattn.training.seq2seq import Seq2SeqTrainer
from tests.seq2seq.helpers import random_pairs, tiny_model


def make(tmp_path, steps: int):
    seed_everything(0)
    model = tiny_model().float().train()
    for layer in model.decoder.layers:  # dropout on, so the restored random state matters
        layer.dropout.p = 0.2
    config = TrainConfig(lr=3e-3, warmup_steps=2, max_steps=steps, batch_size=3, eval_every=3, patience=0)
    return Seq2SeqTrainer(model, config, seed=1, quiet=True, checkpoint_dir=tmp_path)


def test_resume_continues_exactly(tmp_path):
    pairs = random_pairs(9)
    straight = make(tmp_path / "a", 6)
    straight.fit(pairs, pairs[:3])
    first = make(tmp_path / "b", 3)
    first.fit(pairs, pairs[:3])
    resumed = make(tmp_path / "b", 6)
    resumed.fit(pairs, pairs[:3], resume=tmp_path / "b" / "last.pt")
    assert resumed.result.steps == 6 and [h["step"] for h in resumed.result.history] == [3, 6]
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    assert (tmp_path / "b" / "best.pt").is_file()


def test_training_lowers_the_loss(tmp_path):
    pairs = random_pairs(6)
    trainer = make(tmp_path, 30)
    before = trainer.evaluate(pairs)["loss"]
    trainer.fit(pairs, pairs)
    assert trainer.evaluate(pairs)["loss"] < 0.8 * before


def test_dev_score_picks_the_weights(tmp_path):
    from structattn.training import load_checkpoint

    pairs = random_pairs(6)
    trainer = make(tmp_path, 30)
    calls = []
    trainer.dev_score = lambda m: calls.append(1) or -len(calls)  # the first evaluation scores best
    result = trainer.fit(pairs, pairs)
    assert result.best_step == 3 and len(calls) == 10 and result.steps == 30
    best, last = load_checkpoint(tmp_path / "best.pt")["model"], load_checkpoint(tmp_path / "last.pt")["model"]
    name = "decoder.layers.0.ffn.0.weight"
    assert torch.equal(trainer.model.state_dict()[name], best[name])
    assert not torch.equal(best[name], last[name])
