"""encode_text: the supported route from parsed sentences to embeddings of an attached model; a transformers
feature-extraction pipeline cannot pass structures and fails loudly."""

from __future__ import annotations

import pytest
import torch

import structattn.hf as H
from structattn.hf.collator import StructureCollator
from tests.hf.conftest import tiny_model

PLAN = "soft_bias(dependency)@0; hard_mask(dependency, radius=2)*2 + full*2@1"


@pytest.fixture(scope="module")
def model(tokenizer):
    model = H.attach(tiny_model("bert", tokenizer), PLAN)
    with torch.no_grad():
        H.attached_layers(model)[0].variants[0].table.normal_()
    return model


def test_word_token_and_mean_pooling_match_a_direct_run(model, tokenizer, short_sentences):
    encoded = StructureCollator(tokenizer).encode(short_sentences)
    with torch.no_grad():
        hidden = model(**encoded.batch).last_hidden_state
    real = encoded.batch["attention_mask"].bool()
    index, word_mask = encoded.first_subtokens()
    words = H.encode_text(model, tokenizer, short_sentences)
    tokens = H.encode_text(model, tokenizer, short_sentences, pooling="token")
    means = H.encode_text(model, tokenizer, short_sentences, pooling="mean")
    for k, s in enumerate(short_sentences):
        assert words[k].shape == (len(s), hidden.shape[-1])
        torch.testing.assert_close(words[k], hidden[k, index[k, word_mask[k]]], atol=0, rtol=0)
        torch.testing.assert_close(tokens[k], hidden[k, real[k]], atol=0, rtol=0)
        torch.testing.assert_close(means[k], hidden[k, real[k]].mean(0), atol=1e-6, rtol=0)


def test_batch_size_does_not_change_results(model, tokenizer, short_sentences):
    one = H.encode_text(model, tokenizer, short_sentences, batch_size=1)
    all_ = H.encode_text(model, tokenizer, short_sentences, batch_size=3)
    for a, b in zip(one, all_):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_model_mode_is_restored_and_strings_refused(model, tokenizer, short_sentences):
    model.train()
    H.encode_text(model, tokenizer, short_sentences[:1])
    assert model.training
    model.eval()
    with pytest.raises(ValueError, match="sentence 1 is a str .*parse raw text first"):
        H.encode_text(model, tokenizer, [short_sentences[0], "raw text"])


def test_feature_extraction_pipeline_cannot_pass_structures(model, tokenizer):
    from transformers import pipeline

    extract = pipeline("feature-extraction", model=model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="needs structure 'dependency', but the forward call carries no structures"):
        extract("A plain string has no parse to align.")
