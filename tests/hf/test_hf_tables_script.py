"""scripts/hf_tables.py: the grammar data it writes, the settings it passes, the probe table it prints."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")

from structattn.structures import read_conllu  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("hf_tables", ROOT / "scripts" / "hf_tables.py")
script = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(script)


def test_grammar_data_is_seeded_and_disjoint(tmp_path, monkeypatch):
    monkeypatch.setattr(script, "TEXT_SENTENCES", 50)
    monkeypatch.setattr(script, "TREEBANK_SENTENCES", 20)
    text, treebank = script.write_grammar_data(tmp_path / "a")
    again, _ = script.write_grammar_data(tmp_path / "b")
    assert text.read_text() == again.read_text() and len(text.read_text().splitlines()) == 50
    sentences = read_conllu(treebank)
    assert len(sentences) == 20 and all(s.heads is not None for s in sentences)
    # the treebank (seed 1) is not the start of the MLM text (seed 0)
    assert " ".join(sentences[0].words) != text.read_text().splitlines()[0]


def test_probe_table_pairs_model_and_control_per_layer(tmp_path):
    rows = []
    for model, uuas in (("mlm", 0.7), ("random control", 0.6)):
        for layer in (0, 1):
            rows.append((model, layer, "", "structural_distance", "uuas", uuas + layer / 100))
            rows.append((model, layer, "", "structural_distance", "spearman", 0.5))
            if layer:
                rows.append((model, layer, 0, "tree_induction", "uuas", 0.3))  # a per-head row: not in the table
                rows.append((model, layer, "", "tree_induction", "best_head_uuas", 0.4 if model == "mlm" else 0.2))
                rows.append((model, layer, "", "tree_induction", "random_baseline", 0.13))
    path = tmp_path / "probe.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "layer", "head", "probe", "metric", "value"])
        writer.writerows(rows)
    table = script.probe_table(path)
    assert "Each cell: mlm / random control." in table
    assert "| 0 | 0.700 / 0.600 | 0.500 / 0.500 |" in table
    assert "| 1 | 0.710 / 0.610 |" in table and "0.400 / 0.200 |" in table
    assert "random trees 0.130" in table


def test_finetune_settings_name_the_model_and_treebank(tmp_path):
    """The bindings the script passes to compare: both settings on the pretrained folder (one with the
    plan), both tasks on the grammar treebank, and the short fine-tuning schedule."""
    params = script.finetune_params(tmp_path / "mlm", tmp_path / "treebank.conllu")
    assert params[::2] == ["--gin-param"] * (len(params) // 2)
    text = "\n".join(params[1::2])
    assert f"'bert': 'hf(path=\"{tmp_path / 'mlm'}\")'" in text
    assert f"'bert+soft_bias': 'hf(path=\"{tmp_path / 'mlm'}\", plan=\"{script.PLAN}\")'" in text
    assert text.count(f'source=\"{tmp_path / "treebank.conllu"}\"') == 2
    assert f"training.max_steps = {script.FINETUNE_STEPS}" in text
