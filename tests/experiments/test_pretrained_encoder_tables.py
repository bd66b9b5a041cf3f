"""``scripts/pretrained_encoder_tables.py``: the four contrasts of the pretrained-encoder translation comparison,
pooled over seeds, Holm-corrected over all of them, on a tiny comparison of the same four setting labels."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, run_comparison
from structattn.experiments.significance import holm
from structattn.training import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
TASK = "translation_synthetic(train=60, dev=8, test=12, grammar_depth=1, max_words=8)"
SETUP = Setup(EncoderConfig(d_model=24, num_layers=1, num_heads=2, ffn_dim=40, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=1, max_steps=3, batch_size=16, eval_every=3, patience=0))
SETTINGS = {"minilm": 'hf(config="tiny_bert", pretrained_lr=1e-3)',
            "minilm+soft_bias(dep)": 'hf(config="tiny_bert", plan="soft_bias(dependency)", pretrained_lr=1e-3)',
            "scratch": "full", "scratch+soft_bias(dep)": "soft_bias(dependency)"}


def _script():
    spec = importlib.util.spec_from_file_location("pretrained_encoder_tables",
                                                  ROOT / "scripts" / "pretrained_encoder_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_four_contrasts_pooled_over_seeds_with_one_holm_correction(tmp_path, capsys):
    script = _script()
    out = tmp_path / "cmp"
    run_comparison(Comparison.declare({"mt": TASK}, SETTINGS, [0, 1], SETUP), out, quiet=True, plots=False,
                   reference="scratch")
    assert script.main([str(out)]) == 0
    text = (out / "contrasts.md").read_text()
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    pairs = [(r[0].lstrip("| "), r[1]) for r in rows]
    assert sorted(set(pairs), key=pairs.index) == script.CONTRASTS  # every contrast, in table order
    metrics = {r[2] for r in rows}
    assert {"bleu", "chrf"} <= metrics and len(rows) == 4 * len(metrics)
    records = [json.loads(f.read_text()) for f in sorted((out / "runs").glob("*.json"))]
    tested = script.contrast_rows(records)
    assert [r.p_holm for r in tested] == holm([r.result.p for r in tested])  # one family: all rows together
    assert [f"{r.p_holm:.3f}" for r in tested] == [r[6] for r in rows]
    assert "seeds [0, 1]" in text and "12 test sentences" in text
    assert "# Contrasts" in capsys.readouterr().out
    assert script.main([str(out), "--tables-only"]) == 0 and "# Contrasts" in capsys.readouterr().out


def test_tables_only_without_tables_says_what_to_do(tmp_path, capsys):
    assert _script().main([str(tmp_path), "--tables-only"]) == 2
    assert "run without --tables-only" in capsys.readouterr().err
