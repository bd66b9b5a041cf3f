"""A 2,000-word sentence and a model with 64 positions: refused at collation by name (sentence, token count,
limit, where the limit comes from, the option that truncates), not left to fail inside the position embeddings."""

from __future__ import annotations

import copy
import re

import pytest
import torch

from structattn.hf.collator import StructureCollator
from structattn.structures import Sentence
from tests.hf.conftest import tiny_model

POSITIONS = 64


@pytest.fixture(scope="module")
def long_sentence(treebank):
    words = [w for s in treebank for w in s.words]
    words = (words * (1 + 2000 // len(words)))[:2000]
    return Sentence(words=words, heads=[-1] + list(range(len(words) - 1)), id="long-2000")


def _tokens(tokenizer, sentence):
    return len(tokenizer(list(sentence.words), is_split_into_words=True, verbose=False)["input_ids"])


def test_the_models_position_limit_refuses_the_sentence_by_name(tokenizer, long_sentence):
    model = tiny_model("bert", tokenizer, max_position_embeddings=POSITIONS)
    count = _tokens(tokenizer, long_sentence)
    assert count > 2000 and StructureCollator(tokenizer).max_length is None  # the tokenizer alone knows no limit
    with pytest.raises(ValueError) as caught:
        StructureCollator(tokenizer, model=model)([long_sentence])
    assert str(caught.value) == (
        f"sentence 'long-2000' has {count} tokens, more than the model's {POSITIONS} (its position table); split or "
        f"drop it, or pass truncation=True to StructureCollator to keep its first {POSITIONS} tokens (max_length "
        "sets the cut; the words cut off leave the structure)")


def test_truncation_named_by_the_message_makes_the_batch_fit(tokenizer, long_sentence):
    model = tiny_model("bert", tokenizer, max_position_embeddings=POSITIONS)
    encoded = StructureCollator(tokenizer, model=model, truncation=True).encode([long_sentence])
    batch = encoded.batch
    assert batch["input_ids"].shape == (1, POSITIONS)
    assert batch["structures"]["dependency"].token_mask.shape == (1, POSITIONS)
    with torch.no_grad():
        out = model(**{k: v for k, v in batch.items() if k != "structures"}).last_hidden_state
    assert out.shape[:2] == (1, POSITIONS) and torch.isfinite(out).all()


def test_the_tokenizers_limit_and_an_explicit_max_length_are_named(tokenizer, long_sentence):
    count = _tokens(tokenizer, long_sentence)
    limited = copy.deepcopy(tokenizer)
    limited.model_max_length = POSITIONS
    with pytest.raises(ValueError, match=re.escape(
            f"sentence 'long-2000' has {count} tokens, more than the model's {POSITIONS} (the tokenizer's "
            "model_max_length); split or drop it, or pass truncation=True")):
        StructureCollator(limited)([long_sentence])
    with pytest.raises(ValueError, match=re.escape(f"has {count} tokens, more than the model's 100 (max_length=100);")):
        StructureCollator(tokenizer, max_length=100)([long_sentence])


def test_an_attached_models_forward_refuses_what_a_collator_without_a_limit_let_through(tokenizer, long_sentence,
                                                                                      short_sentences):
    """No model, no max_length and a tokenizer without model_max_length: the collator cannot know the limit, so
    the attached model's forward names the sentence (before: "The size of tensor a (6269) must match the size of
    tensor b (64)" from inside BERT's embeddings)."""
    from structattn.hf import attach

    model = attach(tiny_model("bert", tokenizer, max_position_embeddings=POSITIONS), "soft_bias(dependency)")
    short = short_sentences[0]
    batch = StructureCollator(tokenizer)([short, long_sentence])
    count, small = _tokens(tokenizer, long_sentence), _tokens(tokenizer, short)
    assert small <= POSITIONS < count
    remedy = (f": more than the model's {POSITIONS} positions (max_position_embeddings of its config); pass "
              f"truncation=True with max_length={POSITIONS} to StructureCollator to keep the first {POSITIONS} tokens "
              "(or give it model=... to refuse such a sentence at collation), or split or drop the sentence")
    with pytest.raises(ValueError, match=exactly(f"sentence 'long-2000' has {count} tokens{remedy}")):
        model(**batch)
    with pytest.raises(ValueError, match=exactly(f"row 1 of the batch has {count} tokens{remedy}")):
        model.base_model(batch["input_ids"], attention_mask=batch["attention_mask"])  # no structures: no ids
    truncated = StructureCollator(tokenizer, max_length=POSITIONS, truncation=True)([short, long_sentence])
    with torch.no_grad():
        out = model(**truncated).last_hidden_state
    assert out.shape[:2] == (2, POSITIONS) and torch.isfinite(out).all()


def test_roberta_counts_its_padding_offset_in_the_forwards_limit(tokenizer, long_sentence):
    from structattn.hf import attach

    model = attach(tiny_model("roberta", tokenizer, max_position_embeddings=POSITIONS), "soft_bias(dependency)")
    batch = StructureCollator(tokenizer)([long_sentence])
    limit = POSITIONS - tokenizer.pad_token_id - 1  # positions start after the padding index
    with pytest.raises(ValueError, match=re.escape(f"more than the model's {limit} positions")):
        model(**batch)
    fitting = StructureCollator(tokenizer, max_length=limit, truncation=True)([long_sentence])
    with torch.no_grad():
        assert torch.isfinite(model(**fitting).last_hidden_state).all()


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def _sentence_over(tokenizer, treebank, limit: int) -> Sentence:
    """A sentence of more than ``limit`` tokens (every word has at least one), ``limit + 10`` words."""
    words = [w for s in treebank for w in s.words][: limit + 10]
    return Sentence(words=words, heads=[-1] + list(range(len(words) - 1)), id=f"over-{limit}")


@pytest.mark.parametrize("family, extra, limit", [
    ("albert", {}, 512), ("bart", {}, 64), ("marian", {}, 64), ("deberta", {}, 128),
])
def test_families_with_a_position_table_refuse_at_the_forward(tokenizer, treebank, family, extra, limit):
    """Each of these fails inside the model past its table ("index out of range in self", "The expanded size of
    the tensor (517) must match the existing size (512)"): refused by name instead."""
    from structattn.hf import attach
    from tests.hf.test_families import _model

    model = attach(_model(family, tokenizer, **extra), "soft_bias(dependency)")
    sentence = _sentence_over(tokenizer, treebank, limit)
    batch = StructureCollator(tokenizer)([sentence])
    count = batch["input_ids"].shape[1]
    extra_inputs = {"decoder_input_ids": batch["input_ids"][:, :3]} if family in ("bart", "marian") else {}
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
              "structures": batch["structures"]}
    refused = re.escape(f"sentence 'over-{limit}' has {count} tokens: more than the model's {limit} positions")
    with pytest.raises(ValueError, match=refused):
        model(**inputs, **extra_inputs)
    if extra_inputs:  # the encoder of an encoder-decoder model, called by itself
        with pytest.raises(ValueError, match=refused):
            model.get_encoder()(**inputs)


@pytest.mark.parametrize("family, extra", [
    ("modernbert", {}), ("t5", {}), ("deberta", {"position_biased_input": False}),
])
def test_families_without_a_position_table_still_take_longer_inputs(tokenizer, treebank, family, extra):
    """Rotary (ModernBERT) and relative (T5, DeBERTa-v3 style) positions run past max_position_embeddings: not
    refused, as before."""
    from structattn.hf import attach
    from tests.hf.test_families import _model

    model = attach(_model(family, tokenizer, **extra), "soft_bias(dependency)")
    batch = StructureCollator(tokenizer)([_sentence_over(tokenizer, treebank, 128)])
    assert batch["input_ids"].shape[1] > getattr(model.config, "max_position_embeddings", 0)
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    structures=batch["structures"]).last_hidden_state
    assert torch.isfinite(out).all()
