"""compare.training_by_setting: one setting trains with its own options (each setting at the learning rate its
own tuning picked), the others with training.*; the fingerprint changes only when it is given; bad entries are
refused by name before any training."""

from __future__ import annotations

import pytest

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, gin_setup, run_comparison
from structattn.training import TrainConfig

TASK = "depth_tagging(limit=24, max_depth=3)"
SETUP = Setup(EncoderConfig(d_model=8, num_layers=1, num_heads=2, ffn_dim=8, dropout=0.0),
              TrainConfig(lr=1e-3, warmup_steps=1, max_steps=4, batch_size=8, eval_every=2, patience=0))
SETTINGS = {"full": "full", "mask": "hard_mask(dependency)"}


def test_one_setting_trains_at_its_own_rate(tmp_path):
    comparison = Comparison.declare({"depth": TASK}, SETTINGS, [0], SETUP, {"mask": {"lr": 4e-3}})
    assert comparison.setup_for("full") is SETUP and comparison.setup_for("mask").training.lr == 4e-3
    assert comparison.setup_for("mask").training.max_steps == 4  # every other option stays
    records = run_comparison(comparison, tmp_path / "out", quiet=True, plots=False)
    lr = {r["setting"]: [h["lr"] for h in r["history"]] for r in records}
    assert lr["mask"] == pytest.approx([4 * x for x in lr["full"]])  # same schedule, four times the peak


def test_the_fingerprint_changes_only_when_overrides_are_given():
    plain = Comparison.declare({"depth": TASK}, SETTINGS, [0], SETUP)
    assert Comparison.declare({"depth": TASK}, SETTINGS, [0], SETUP, {}).fingerprint() == plain.fingerprint()
    tuned = Comparison.declare({"depth": TASK}, SETTINGS, [0], SETUP, {"mask": {"lr": 4e-3}})
    assert tuned.fingerprint() != plain.fingerprint()


@pytest.mark.parametrize("overrides, message", [
    ({"soft": {"lr": 1e-3}}, r"'soft' is not one of the setting labels \['full', 'mask'\]"),
    ({"mask": {"learning_rate": 1e-3}}, r"\['learning_rate'\] are not training options"),
    ({"mask": {"lr": -1.0}}, r"training_by_setting\['mask'\]: .*lr"),
])
def test_bad_entries_are_refused_naming_them(overrides, message):
    with pytest.raises(ValueError, match=message):
        Comparison.declare({"depth": TASK}, SETTINGS, [0], SETUP, overrides)


def test_gin_binds_it_and_refuses_a_non_dict(tmp_path):
    config = tmp_path / "c.gin"
    config.write_text("include 'models/tiny.gin'\ninclude 'runs/quick.gin'\ncompare.tasks = {'depth': 'depth_tagging(limit=24, max_depth=3)'}\n"
                      "compare.settings = {'full': 'full', 'mask': 'hard_mask(dependency)'}\n"
                      "compare.training_by_setting = {'mask': {'lr': 4e-3}}\n")
    gin_setup.parse(config)
    comparison = gin_setup.compare(dry_run=True)
    assert comparison.training_by_setting == {"mask": {"lr": 4e-3}}
    gin_setup.parse(config, ["compare.training_by_setting = ['mask']"])
    with pytest.raises(ValueError, match="must be a dict"):
        gin_setup.compare(dry_run=True)
