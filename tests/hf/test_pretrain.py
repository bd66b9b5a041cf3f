"""pretrain_mlm and `structattn pretrain`: tiny offline MLM runs that save a loadable model and tokenizer."""

from __future__ import annotations

import json

import pytest
import torch

from structattn.hf import attached_layers, from_pretrained
from structattn.hf.collator import StructureCollator
from structattn.hf.pretrain import PretrainConfig, pretrain_mlm
from structattn.structures import bundled_treebank, load_bundled

TINY = PretrainConfig(layers=2, width=32, heads=4, steps=5, batch_size=4, vocab_size=300, warmup_steps=1, max_length=96)


def test_pretrain_with_plan_saves_a_reloadable_attached_model(tmp_path):
    sentences = load_bundled(40)
    model, tokenizer, losses = pretrain_mlm(sentences, tmp_path, plan="soft_bias(dependency)@0; full", config=TINY,
                                            progress=False)
    assert len(losses) == 5 and all(torch.isfinite(torch.tensor(losses)))
    table = attached_layers(model)[0].variants[0].table
    assert table.abs().sum() > 0  # the bias table was trained (it starts at zero)
    record = json.loads((tmp_path / "pretrain.json").read_text())
    assert record["plan"] == "soft_bias(dependency)@0; full" and record["losses"] == losses
    from transformers import AutoTokenizer

    loaded, tok = from_pretrained(tmp_path).eval(), AutoTokenizer.from_pretrained(tmp_path)
    assert tok.get_vocab() == tokenizer.get_vocab()
    batch = StructureCollator(tok)([s for s in sentences if len(s) < 15][:3])
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, atol=0, rtol=0)


def test_plan_without_structures_is_refused():
    with pytest.raises(ValueError, match="CoNLL-U"):
        pretrain_mlm(["a raw line", "another"], plan="soft_bias(dependency)", config=TINY, progress=False)


def test_pretrain_command_on_raw_text(tmp_path, capsys):
    from structattn.cli import main

    text = tmp_path / "text.txt"
    text.write_text("\n".join(" ".join(s.words) for s in load_bundled(30)), encoding="utf-8")
    out = tmp_path / "model"
    args = ["pretrain", "--text", str(text), "--out", str(out), "--layers", "2", "--width", "32", "--heads", "4",
            "--steps", "3", "--batch-size", "4", "--vocab-size", "300", "--quiet"]
    assert main(args) == 0
    assert "3 steps" in capsys.readouterr().out
    assert {"config.json", "model.safetensors", "tokenizer.json", "pretrain.json"} <= {p.name for p in out.iterdir()}
    assert main(args) == 1  # a non-empty --out is refused
    assert "not empty" in capsys.readouterr().err


def test_pretrain_command_reads_a_treebank(tmp_path):
    from structattn.hf.pretrain_command import main

    out = tmp_path / "model"
    main(["--text", str(bundled_treebank()), "--limit", "20", "--out", str(out), "--plan", "soft_bias(dependency)@1; full",
          "--layers", "2", "--width", "32", "--heads", "4", "--steps", "2", "--batch-size", "4", "--vocab-size", "300",
          "--quiet"])
    assert json.loads((out / "config.json").read_text())["structattn"]["plan"] == "soft_bias(dependency)@1; full"
