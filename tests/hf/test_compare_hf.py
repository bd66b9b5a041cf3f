"""HF settings inside a comparison: validated, trained, recorded next to ordinary plans."""

from __future__ import annotations

import pytest

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, evaluate_checkpoint, run_comparison
from structattn.training import TrainConfig
from structattn.training.checkpoints import load_checkpoint

SETUP = Setup(EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.1),
              TrainConfig(lr=3e-3, warmup_steps=2, max_steps=4, batch_size=8, eval_every=2, patience=0))
TASKS = {"depth": "depth_tagging(limit=30, max_depth=3)"}


def test_hf_settings_train_beside_a_plan(tmp_path):
    settings = {"full": "full", "bert": 'hf(config="tiny_bert", vocab_size=300)',
                "bert+soft_bias": 'hf(config="tiny_bert", plan="soft_bias(dependency)@0; full", vocab_size=300)'}
    comparison = Comparison.declare(TASKS, settings, [0], SETUP)
    comparison.dry_run()
    records = run_comparison(comparison, tmp_path / "out", quiet=True, plots=False)
    assert [r["setting"] for r in records] == ["full", "bert", "bert+soft_bias"]
    for r in records:
        assert 0 <= r["metrics"]["test_accuracy"] <= 1 and r["steps"] == 4
    assert records[1]["bias"] == [] and [b["layer"] for b in records[2]["bias"]] == [0]
    for r in records[1:]:  # the heatmap labels every row of the attention, the special tokens included
        heat = r["heatmap"]
        assert len(heat["tokens"]) == len(heat["layers"][0])
        assert heat["tokens"][0] == "[CLS]" and heat["tokens"][-1] == "[SEP]"
    assert "bert+soft_bias" in (tmp_path / "out" / "results.md").read_text()
    # `structattn eval` rebuilds an HF run (with the WordPiece the checkpoint stored) and scores it alike
    for r in records[1:]:
        data = load_checkpoint(tmp_path / "out" / "runs" / r["run_id"] / "checkpoints" / "best.pt")
        scores = evaluate_checkpoint(data, "test", quiet=True)
        assert scores["accuracy"] == pytest.approx(r["metrics"]["test_accuracy"], abs=1e-9)


def test_bad_hf_setting_is_refused_before_training(tmp_path):
    comparison = Comparison.declare(TASKS, {"bert": f'hf(path="{tmp_path / "absent"}")'}, [0], SETUP)
    with pytest.raises(ValueError, match="setting 'bert'"):
        comparison.validate()
