"""StructureCollator(global_tokens=...): [CLS]/[SEP] (or chosen ids) one hop from every real token, so that under
hard_mask the [CLS] row spreads over the sentence instead of attending only to itself."""

from __future__ import annotations

import pytest
import torch

import structattn.hf as H
from structattn.hf.collator import StructureCollator
from structattn.hf.global_tokens import GLOBAL_DISTANCE, with_global_tokens
from structattn.hf.interface import eager_attention
from structattn.structures import Structure
from tests.hf.conftest import tiny_model


def _weights(model, batch):
    with torch.no_grad(), eager_attention(model):
        return model(**batch, output_attentions=True).attentions


@pytest.mark.parametrize("plan", ["hard_mask(dependency, radius=1)", "soft_bias(dependency)"])
def test_cls_row_spreads_over_real_tokens_only_with_the_option(tokenizer, short_sentences, plan):
    model = H.attach(tiny_model("bert", tokenizer), plan)
    plain = StructureCollator(tokenizer)(short_sentences)
    spread = StructureCollator(tokenizer, global_tokens="special")(short_sentences)
    real = plain["attention_mask"].bool()
    lengths = real.sum(-1)
    for layer_weights_plain, layer_weights_spread in zip(_weights(model, plain), _weights(model, spread)):
        cls_plain, cls_spread = layer_weights_plain[:, :, 0], layer_weights_spread[:, :, 0]  # (b, h, n)
        assert bool((cls_spread[real[:, None, :].expand_as(cls_spread)] > 0).all())  # every real key
        assert bool((cls_spread[~real[:, None, :].expand_as(cls_spread)] == 0).all())  # no padding
        if plan.startswith("hard_mask"):
            torch.testing.assert_close(cls_plain[..., 0], torch.ones_like(cls_plain[..., 0]))  # only itself
            assert bool((cls_plain[..., 1:] == 0).all())
        for k, n in enumerate(lengths.tolist()):  # every word's row reaches [CLS] and [SEP] with the option
            rows = layer_weights_spread[k, :, 1 : n - 1]  # (h, words, n)
            assert bool((rows[..., 0] > 0).all()) and bool((rows[..., n - 1] > 0).all())
            if plan.startswith("hard_mask"):
                assert bool((layer_weights_plain[k, :, 1 : n - 1, 0] == 0).all())


def test_structure_values_and_default_unchanged(tokenizer, short_sentences):
    plain = StructureCollator(tokenizer)(short_sentences)["structures"]["dependency"]
    default = StructureCollator(tokenizer, global_tokens=None)(short_sentences)["structures"]["dependency"]
    torch.testing.assert_close(default.distance, plain.distance, atol=0, rtol=0)
    spread = StructureCollator(tokenizer, global_tokens=[tokenizer.cls_token_id])(short_sentences)["structures"]["dependency"]
    real = plain.token_mask
    for k, n in enumerate(real.sum(-1).tolist()):
        assert spread.distance[k, 0, 0] == 0
        assert bool((spread.distance[k, 0, 1:n] == GLOBAL_DISTANCE).all()) and bool((spread.distance[k, 1:n, 0] == 1).all())
        assert bool((spread.distance[k, 0, n:] == -1).all())  # padding stays unreachable
        assert bool(spread.adjacency[k, 0, :n].all()) and not bool(spread.adjacency[k, 0, n:].any())
        # [SEP] (not chosen) and the words among themselves keep their distances
        torch.testing.assert_close(spread.distance[k, 1:n, 1:n], plain.distance[k, 1:n, 1:n], atol=0, rtol=0)
    assert spread.is_global[:, 0].all() and not spread.is_global[:, 1:].any()


def test_pieces_of_one_word_keep_distance_zero():
    """A chosen token that shares a word with another piece (distance 0) keeps 0 there, 1 elsewhere."""
    distance = torch.tensor([[[0, 0, 2], [0, 0, 1], [2, 1, 0]]])
    structure = Structure(distance=distance, adjacency=distance.abs() <= 1, token_mask=torch.ones(1, 3, dtype=torch.bool))
    out = with_global_tokens(structure, torch.tensor([[True, False, False]]))
    assert out.distance.tolist() == [[[0, 0, 1], [0, 0, 1], [1, 1, 0]]]


@pytest.mark.parametrize("bad", ["cls", [10**7], [True], []])
def test_bad_choice_is_refused(tokenizer, bad):
    with pytest.raises(ValueError, match="global_tokens"):
        StructureCollator(tokenizer, global_tokens=bad)
