"""save_pretrained keeps the plan and the structattn parameters; from_pretrained rebuilds both."""

from __future__ import annotations

import json

import pytest
import torch

import structattn.hf as H
from structattn.hf.collator import StructureCollator
from structattn.hf.loading import from_pretrained
from tests.hf.conftest import tiny_model


def test_round_trip_keeps_plan_parameters_and_outputs(tmp_path, tokenizer, short_sentences):
    model = tiny_model("bert", tokenizer, head="BertForMaskedLM")
    plan = "soft_bias(dependency, per_head=True)@0; hard_mask(dependency, radius=2)*2 + full*2@1"
    H.attach(model, plan)
    with torch.no_grad():
        H.attached_layers(model)[0].variants[0].table.normal_()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())["structattn"]
    assert saved["plan"] == plan and saved["version"] and saved["base_attention"] == "sdpa"
    loaded = from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "BertForMaskedLM"
    torch.testing.assert_close(H.attached_layers(loaded)[0].variants[0].table, H.attached_layers(model)[0].variants[0].table)
    batch = StructureCollator(tokenizer)(short_sentences)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, atol=0, rtol=0)


def test_plain_checkpoint_loads_and_attaches(tmp_path, tokenizer, short_sentences):
    model = tiny_model("roberta", tokenizer)
    model.save_pretrained(tmp_path)
    plain = from_pretrained(tmp_path)
    assert H.attached_layers(plain) == {}
    attached = from_pretrained(tmp_path, plan="soft_bias(dependency)").eval()
    batch = StructureCollator(tokenizer)(short_sentences)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        plain_out = plain.eval()(**{k: v for k, v in batch.items() if k != "structures"}).last_hidden_state
        torch.testing.assert_close(attached(**batch).last_hidden_state[real], plain_out[real], atol=1e-6, rtol=0)


def test_plan_mismatch_is_refused(tmp_path, tokenizer):
    model = tiny_model("bert", tokenizer)
    H.attach(model, "soft_bias(dependency)")
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="saved with plan"):
        from_pretrained(tmp_path, plan="full")


def test_missing_model_path_says_how_to_fetch(tmp_path):
    with pytest.raises(FileNotFoundError, match="hf download") as caught:
        from_pretrained(tmp_path / "bert-base-cased")
    assert isinstance(caught.value, ValueError)  # setting validation reports it like any bad setting


def test_checkpoint_with_a_head_loads_into_the_bare_model(tmp_path, tokenizer, short_sentences):
    """Pretrained as BertForMaskedLM, fine-tuned as BertModel: the structattn keys lose the 'bert.' prefix."""
    from transformers import AutoModel

    model = tiny_model("bert", tokenizer, head="BertForMaskedLM")
    H.attach(model, "soft_bias(dependency)@1; full")
    with torch.no_grad():
        H.attached_layers(model)[1].variants[0].table.normal_()
    model.save_pretrained(tmp_path)
    bare = from_pretrained(tmp_path, model_class=AutoModel).eval()
    assert type(bare).__name__ == "BertModel"
    torch.testing.assert_close(H.attached_layers(bare)[1].variants[0].table, H.attached_layers(model)[1].variants[0].table)
    batch = StructureCollator(tokenizer)(short_sentences)
    with torch.no_grad():
        torch.testing.assert_close(bare(**batch).last_hidden_state, model.bert(**batch).last_hidden_state, atol=0, rtol=0)


def test_attached_checkpoint_loaded_plainly_points_to_from_pretrained(tmp_path, tokenizer):
    from transformers import BertModel

    model = tiny_model("bert", tokenizer)
    H.attach(model, "soft_bias(dependency)")
    model.save_pretrained(tmp_path)
    plain = BertModel.from_pretrained(tmp_path)  # the family class itself loads without the structure (documented)
    with pytest.raises(ValueError, match="structattn.hf.from_pretrained"):
        H.attach(plain, "soft_bias(dependency)")


@pytest.mark.parametrize("keep", ["half", "all but the closing brace", "nothing"])
def test_truncated_config_json_is_named(tmp_path, tokenizer, keep):
    tiny_model("bert", tokenizer).save_pretrained(tmp_path)
    config = tmp_path / "config.json"
    text = config.read_text().rstrip()
    config.write_text(text[: {"half": len(text) // 2, "all but the closing brace": len(text) - 1, "nothing": 0}[keep]])
    with pytest.raises(ValueError, match=r"config\.json is not valid JSON .*truncated or damaged"):
        from_pretrained(tmp_path)


@pytest.mark.parametrize("keep", ["4 bytes", "inside the header", "half the weights", "all but one byte"])
def test_truncated_safetensors_is_named(tmp_path, tokenizer, short_sentences, keep):
    """Cut anywhere (inside the length prefix, the header, the weights), the file fails by name, before
    transformers reads it; the untouched checkpoint loads."""
    model = tiny_model("bert", tokenizer)
    H.attach(model, "soft_bias(dependency)@0; full")
    model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    header = 8 + int.from_bytes(data[:8], "little")
    cut = {"4 bytes": 4, "inside the header": header // 2, "half the weights": (header + len(data)) // 2,
           "all but one byte": len(data) - 1}[keep]
    from_pretrained(tmp_path)  # whole: loads
    weights.write_bytes(data[:cut])
    with pytest.raises(ValueError, match=rf"model\.safetensors \({cut} bytes\) is not a readable safetensors file"):
        from_pretrained(tmp_path)
