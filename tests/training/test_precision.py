"""``training.precision = "bf16"``: training forward passes under bfloat16 autocast (weights stay float32),
for the encoder and the translation trainer and every variant kind; fp32 stays the default, left out of the
recorded config so earlier fingerprints hold."""

from __future__ import annotations

import pytest
import torch

from structattn import api
from structattn.training import TrainConfig

CONFIG = """
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.max_steps = 6
training.eval_every = 3
training.warmup_steps = 2
training.precision = '{precision}'
compare.seeds = [0]
compare.tasks = {{'depth': 'depth_tagging(limit=30)',
                 'syn': 'translation_synthetic(train=40, dev=6, test=6, grammar_depth=1, max_words=8, beam=2)'}}
compare.settings = {{'full': 'full', 'soft': 'soft_bias(dependency)', 'mask': 'hard_mask(dependency)',
                    'mixed': 'fixed_decay(dependency)*2 + ssan(dependency)*2'}}
"""


def test_precision_values_and_recording():
    assert "precision" not in TrainConfig().to_dict() and TrainConfig(precision="bf16").to_dict()["precision"] == "bf16"
    with pytest.raises(ValueError, match=r"training precision must be one of \['fp32', 'bf16', 'auto'\], got 'fp16'"):
        TrainConfig(precision="fp16")


def test_bf16_trains_every_kind_with_float32_weights_and_other_losses(tmp_path):
    losses = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / precision
        records = api.compare(CONFIG.format(precision=precision), out, quiet=True, plots=False, threads=1)
        losses[precision] = {r["run_id"]: [row["train_loss"] for row in r["history"]] for r in records}
        for r in records:
            assert all(torch.isfinite(torch.tensor(losses[precision][r["run_id"]]))), r["run_id"]
            weights = torch.load(out / "runs" / r["run_id"] / "checkpoints" / "last.pt", weights_only=False)["model"]
            assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.float32}
        assert f"training.precision = '{precision}'" in (out / "config.gin").read_text()
    assert losses["fp32"].keys() == losses["bf16"].keys() and len(losses["bf16"]) == 8
    for run_id, fp32 in losses["fp32"].items():  # autocast took effect: bf16 rounding moves every loss
        assert losses["bf16"][run_id] != fp32, run_id
        assert losses["bf16"][run_id] == pytest.approx(fp32, rel=0.05), run_id


def test_resuming_with_another_precision_is_refused(tmp_path):
    out = tmp_path / "run"
    api.compare(CONFIG.format(precision="bf16").replace("training.max_steps = 6", "training.max_steps = 3"), out,
                quiet=True, plots=False, threads=1, overrides=["compare.settings = {'full': 'full'}",
                                                                "compare.tasks = {'depth': 'depth_tagging(limit=30)'}"])
    with pytest.raises(ValueError, match=r"holds another comparison \(fingerprint"):
        api.compare(CONFIG.format(precision="fp32"), out, quiet=True, plots=False, threads=1, mode="resume",
                    overrides=["compare.settings = {'full': 'full'}", "compare.tasks = {'depth': 'depth_tagging(limit=30)'}"])
