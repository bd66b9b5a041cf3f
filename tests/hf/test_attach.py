"""attach(): exactness against the unattached model, head splits, padding, gradients, errors."""

from __future__ import annotations

import copy

import pytest
import torch

import structattn.hf as H
from structattn.hf.collator import StructureCollator
from structattn.hf.families import self_attention_modules
from structattn.structures import Structure
from tests.hf.conftest import FAMILIES, ROUNDING, tiny_model


def _batch(tokenizer, sentences):
    return StructureCollator(tokenizer)(sentences)


def _plain(batch):
    return {k: v for k, v in batch.items() if k != "structures"}


def _everything_near(batch, name="near"):
    """A structure where every real pair is 0 hops apart (so a hard mask of any radius allows everything)."""
    real = batch["attention_mask"].bool()
    pair = real[:, :, None] & real[:, None, :]
    distance = torch.where(pair, torch.zeros_like(pair, dtype=torch.long), torch.full_like(pair, -1, dtype=torch.long))
    return {**batch, "structures": {name: Structure(distance=distance, adjacency=pair, token_mask=real)}}


def _loss(out, batch):
    """A loss that LayerNorm does not make constant: a fixed random read-out of the real tokens' states."""
    states = out.last_hidden_state[batch["attention_mask"].bool()]
    weights = torch.randn(states.shape[-1], generator=torch.Generator().manual_seed(0))
    return (states @ weights).pow(2).mean()


def _real(out, batch):
    return out.last_hidden_state[batch["attention_mask"].bool()]


@pytest.mark.parametrize("family", FAMILIES)
def test_zero_soft_bias_equals_unattached_with_padding(family, tokenizer, short_sentences):
    model = tiny_model(family, tokenizer)
    reference = copy.deepcopy(model)
    H.attach(model, "soft_bias(dependency)")
    batch = _batch(tokenizer, short_sentences)
    assert batch["attention_mask"].sum(-1).unique().numel() == 3  # padding in the batch
    with torch.no_grad():
        got, want = _real(model(**batch), batch), _real(reference(**_plain(batch)), batch)
    torch.testing.assert_close(got, want, **ROUNDING)


@pytest.mark.parametrize("family", ["bert", "distilbert"])
@pytest.mark.parametrize("plan", ["hard_mask(near, radius=1000)", "hard_mask(near, radius=1000)*2 + full*2",
                                  "full*1 + hard_mask(near, radius=3)*3@1; full"])
def test_all_allowing_hard_mask_equals_unattached(family, plan, tokenizer, short_sentences):
    model = tiny_model(family, tokenizer)
    reference = copy.deepcopy(model)
    H.attach(model, plan, structure_fields={"near": {"distance", "adjacency", "token_mask"}})
    batch = _everything_near(_batch(tokenizer, short_sentences))
    with torch.no_grad():
        torch.testing.assert_close(_real(model(**batch), batch), _real(reference(**_plain(batch)), batch),
                                   **ROUNDING)


def test_head_split_matches_float64_reference(tokenizer, short_sentences):
    """Heads 0-1 masked to tree radius 1, heads 2-3 full: layer 0 against a per-head float64 softmax."""
    model = tiny_model("bert", tokenizer)
    H.attach(model, "hard_mask(dependency, radius=1)*2 + full*2@0; full")
    batch = _batch(tokenizer, short_sentences)
    layer = model.encoder.layer[0].attention.self
    seen = {}
    layer.register_forward_hook(lambda mod, args, kwargs, out: seen.update(x=args[0] if args else kwargs["hidden_states"], out=out[0]),
                                with_kwargs=True)
    with torch.no_grad():
        model(**batch)
    x, got = seen["x"].double(), seen["out"]
    real = batch["attention_mask"].bool()
    distance = batch["structures"]["dependency"].distance
    for b in range(x.shape[0]):
        n = int(real[b].sum())
        for head in range(4):
            cols = slice(8 * head, 8 * head + 8)
            q, k, v = (lin.weight.double()[cols] @ x[b, :n].T + lin.bias.double()[cols, None] for lin in (layer.query, layer.key, layer.value))
            scores = (q.T @ k) / 8**0.5  # (n, n)
            if head < 2:
                near = (distance[b, :n, :n] >= 0) & (distance[b, :n, :n] <= 1)
                scores = scores.masked_fill(~near, float("-inf"))
            want = torch.softmax(scores, -1) @ v.T  # (n, 8)
            torch.testing.assert_close(got[b, :n, cols].double(), want, atol=1e-5, rtol=0)


def test_only_planned_layers_are_attached(tokenizer, short_sentences):
    model = tiny_model("bert", tokenizer)
    reference = copy.deepcopy(model)
    H.attach(model, "soft_bias(dependency)@0; full")
    modules = self_attention_modules(model)
    assert getattr(modules[0], "structattn", None) is not None and getattr(modules[1], "structattn", None) is None
    assert set(H.attached_layers(model)) == {0}
    with torch.no_grad():
        modules[0].structattn.variants[0].table.normal_()
    batch = _batch(tokenizer, short_sentences)
    with torch.no_grad():
        assert not torch.allclose(_real(model(**batch), batch), _real(reference(**_plain(batch)), batch), atol=1e-4)


def test_padding_invariance_with_a_trained_bias(tokenizer, short_sentences):
    model = tiny_model("roberta", tokenizer)
    H.attach(model, "soft_bias(dependency)")
    with torch.no_grad():
        for attached in H.attached_layers(model).values():
            attached.variants[0].table.normal_()
    batch = _batch(tokenizer, short_sentences)
    with torch.no_grad():
        together = model(**batch).last_hidden_state
        for k, s in enumerate(short_sentences):
            alone = _batch(tokenizer, [s])
            n = int(alone["attention_mask"].sum())
            torch.testing.assert_close(together[k, :n], model(**alone).last_hidden_state[0], atol=1e-5, rtol=0)


def test_gradients_reach_new_and_own_parameters(tokenizer, short_sentences):
    model = tiny_model("bert", tokenizer).train()
    H.attach(model, "soft_bias(dependency)@0; full")
    batch = _batch(tokenizer, short_sentences)
    _loss(model(**batch), batch).backward()
    table = model.encoder.layer[0].attention.self.structattn.variants[0].table
    assert table.grad is not None and table.grad.abs().sum() > 0
    for name in ("query", "key", "value"):
        grad = getattr(model.encoder.layer[0].attention.self, name).weight.grad
        assert grad is not None and grad.abs().sum() > 0
    assert model.encoder.layer[1].attention.self.query.weight.grad.abs().sum() > 0
    assert "encoder.layer.0.attention.self.structattn.variants.0.table" in dict(model.named_parameters())


def test_ssan_runs_and_trains_a_step(tokenizer, short_sentences):
    model = tiny_model("electra", tokenizer).train()
    H.attach(model, "ssan(dependency)*2 + full*2@0; full")
    attached = H.attached_layers(model)[0]
    assert attached.variants[0].policy_query.in_features == 32  # the model width, not the group's
    batch = _batch(tokenizer, short_sentences)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = attached.variants[0].policy_query.weight.detach().clone()
    loss = _loss(model(**batch), batch)
    assert torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    assert (before - attached.variants[0].policy_query.weight).abs().max() > 1e-6


def test_missing_structure_names_layer_and_structure(tokenizer, short_sentences):
    model = tiny_model("bert", tokenizer)
    H.attach(model, "full@0; soft_bias(dependency)@1")
    batch = _batch(tokenizer, short_sentences)
    with pytest.raises(ValueError, match=r"layer 1.*'dependency'"):
        model(**_plain(batch))


def test_structures_context_manager_equals_keyword(tokenizer, short_sentences):
    model = tiny_model("xlm-roberta", tokenizer)
    H.attach(model, "soft_bias(dependency)")
    with torch.no_grad():
        H.attached_layers(model)[1].variants[0].table.normal_()
    batch = _batch(tokenizer, short_sentences)
    with torch.no_grad():
        want = model(**batch).last_hidden_state
        with H.structures(model, batch["structures"]):
            got = model(**_plain(batch)).last_hidden_state
    torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_eager_base_returns_weights(tokenizer, short_sentences):
    model = tiny_model("bert", tokenizer)
    model.set_attn_implementation("eager")
    H.attach(model, "hard_mask(dependency, radius=1)@0; full")
    assert model.config._attn_implementation == "structattn_eager"
    batch = _batch(tokenizer, short_sentences)
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
    n = batch["input_ids"].shape[1]
    assert [tuple(a.shape) for a in out.attentions] == [(3, 4, n, n)] * 2
    far = batch["structures"]["dependency"].distance[0] > 1
    assert out.attentions[0][0][:, far].abs().max() == 0  # layer 0 masked beyond radius 1
    assert out.attentions[1][0][:, far].abs().max() > 0  # layer 1 is the model's own eager attention


def test_unsupported_architecture_is_named():
    """DeBERTa v1 (DeBERTa-v2/v3 is supported: tests/hf/test_families.py)."""
    from transformers import DebertaConfig, DebertaModel

    model = DebertaModel(DebertaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=37))
    with pytest.raises(ValueError, match="DebertaModel"):
        H.attach(model, "soft_bias(dependency)")


def test_bad_plans_and_double_attach(tokenizer):
    model = tiny_model("bert", tokenizer)
    with pytest.raises(ValueError, match="layers"):
        H.attach(model, "soft_bias(dependency)@5; full")
    with pytest.raises(ValueError, match="no registered provider"):
        H.attach(model, "soft_bias(nonexistent)")
    H.attach(model, "soft_bias(dependency)")
    with pytest.raises(ValueError, match="already"):
        H.attach(model, "soft_bias(dependency)")


@pytest.mark.parametrize("family", ["bert", "electra"])
def test_zero_soft_bias_equals_unattached_over_eager(family, tokenizer, short_sentences):
    """Over the eager base the additive float mask is read as the padding (the sdpa base gets a bool mask)."""
    model = tiny_model(family, tokenizer)
    model.set_attn_implementation("eager")
    reference = copy.deepcopy(model)
    H.attach(model, "soft_bias(dependency)")
    assert model.config._attn_implementation == "structattn_eager"
    batch = _batch(tokenizer, short_sentences)
    with torch.no_grad():
        torch.testing.assert_close(_real(model(**batch), batch), _real(reference(**_plain(batch)), batch),
                                   **ROUNDING)


def test_structure_padded_unlike_the_attention_mask_is_refused(tokenizer, short_sentences):
    model = tiny_model("bert", tokenizer)
    H.attach(model, "soft_bias(dependency)")
    batch = _batch(tokenizer, short_sentences)
    mask = batch["attention_mask"].clone()
    mask[0, -1] = 0  # the structure says this token is real
    with pytest.raises(ValueError, match=r"layer 0.*pads row 0 differently"):
        model(**{**batch, "attention_mask": mask})


def test_switching_the_attention_implementation_away_is_refused(tokenizer, short_sentences):
    """A model set back to plain sdpa would skip the attached variants silently: it raises instead."""
    model = tiny_model("bert", tokenizer)
    H.attach(model, "soft_bias(dependency)@1; full")
    model.set_attn_implementation("sdpa")
    with pytest.raises(RuntimeError, match=r"layer 1 has structattn attention attached.*'sdpa'"):
        model(**_batch(tokenizer, short_sentences))


def test_a_bad_group_leaves_the_model_untouched(tokenizer):
    model = tiny_model("bert", tokenizer)
    with pytest.raises(ValueError, match="layer 1"):
        H.attach(model, "soft_bias(dependency)@0; soft_bias(dependency, no_such_option=1)@1")
    assert H.attached_layers(model) == {} and model.config._attn_implementation == "sdpa"
    H.attach(model, "soft_bias(dependency)@0; full")  # and can still be attached
