"""The translation trainer: loss goes down, resume from last.pt continues exactly (and only with the same
settings), best weights are kept."""

import pytest
import torch

from structattn.training import TrainConfig, load_checkpoint, seed_everything
from structattn.training.seq2seq import Seq2SeqTrainer
from tests.seq2seq.helpers import random_pairs, tiny_model


def make(tmp_path, steps: int, lr: float = 3e-3, seed: int = 1, eval_every: int = 3):
    seed_everything(0)
    model = tiny_model().float().train()
    for layer in model.decoder.layers:  # dropout on, so the restored random state matters
        layer.dropout.p = 0.2
    config = TrainConfig(lr=lr, warmup_steps=2, max_steps=steps, batch_size=3, eval_every=eval_every, patience=0)
    return Seq2SeqTrainer(model, config, seed=seed, quiet=True, checkpoint_dir=tmp_path)


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


LR, SEED = "training.lr: checkpoint 0.003, config 0.001", "seed: checkpoint 1, config 2"


@pytest.mark.parametrize("changed, named", [({"lr": 1e-3}, [LR]), ({"seed": 2}, [SEED]),
                                            ({"lr": 1e-3, "seed": 2}, [LR, SEED])])
def test_resume_with_other_settings_is_refused(tmp_path, changed, named):
    pairs = random_pairs(9)
    make(tmp_path, 3).fit(pairs, pairs[:3])
    assert load_checkpoint(tmp_path / "last.pt")["seed"] == 1
    resumed = make(tmp_path, 6, **changed)
    with pytest.raises(ValueError, match="other settings") as refused:
        resumed.fit(pairs, pairs[:3], resume=tmp_path / "last.pt")
    assert all(n in str(refused.value) for n in named), str(refused.value)
    assert resumed.loop["step"] == 0  # nothing was restored


def test_resume_may_change_the_length_and_the_evaluation_cadence(tmp_path):
    pairs = random_pairs(9)
    make(tmp_path, 3).fit(pairs, pairs[:3])
    resumed = make(tmp_path, 8, eval_every=4)
    assert resumed.fit(pairs, pairs[:3], resume=tmp_path / "last.pt").steps == 8


def test_training_lowers_the_loss(tmp_path):
    pairs = random_pairs(6)
    trainer = make(tmp_path, 30)
    before = trainer.evaluate(pairs)["loss"]
    trainer.fit(pairs, pairs)
    assert trainer.evaluate(pairs)["loss"] < 0.8 * before


def test_dev_score_picks_the_weights(tmp_path):
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
