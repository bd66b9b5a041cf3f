"""The structured encoder: wiring from a plan, build-time checks, outputs, padding, positions, bias tables."""

import math
import random

import pytest
import torch

from structattn.attention import get_attention
from structattn.encoders import EncoderConfig, SinusoidalPositions, build_encoder, make_positions
from structattn.structures import get_provider
from tests.encoders.util import TINY, make_batch, random_sentence, tiny_encoder


@pytest.fixture
def sentences():
    rng = random.Random(0)
    return [random_sentence(n, rng, sid=f"s{n}") for n in (7, 4, 5)]


def test_layers_follow_the_plan():
    encoder = tiny_encoder("soft_bias(dependency)@0; hard_mask(dependency)*1 + full")
    first, second = (layer.attention for layer in encoder.layers)
    assert [g.variant for g in first.groups] == ["soft_bias"] and first.groups[0].num_heads == 3
    assert [(g.variant, g.num_heads) for g in second.groups] == [("hard_mask", 1), ("full", 2)]
    assert type(first.variants[0]) is type(get_attention("soft_bias", num_heads=3, head_dim=4))
    assert encoder.structure_names == {"dependency"}


def test_forward_shapes_and_weights(sentences):
    torch.manual_seed(0)
    encoder = tiny_encoder("soft_bias(dependency)@0; full").eval()
    batch = make_batch(sentences)
    out = encoder(batch.input_ids, batch.token_mask, batch.structures, return_weights=True, return_bias=True)
    assert out.hidden.shape == (3, 7, 12)
    assert [tuple(w.shape) for w in out.attentions] == [(3, 3, 7, 7)] * 2
    real = batch.token_mask
    for w in out.attentions:
        sums = w.sum(-1)  # (b, h, n)
        assert torch.allclose(sums[real[:, None, :].expand_as(sums)], torch.ones(()), atol=1e-5)
        assert (w[~real[:, None, :, None].expand_as(w)] == 0).all() and (w.masked_select(~real[:, None, None, :]) == 0).all()
    assert (out.hidden[~real] == 0).all()
    assert list(out.bias_tables[0]) == ["soft_bias(dependency)"] and out.bias_tables[1] == {}


def test_hard_mask_heads_stay_on_the_tree_while_full_heads_do_not(sentences):
    torch.manual_seed(1)
    encoder = tiny_encoder("hard_mask(dependency)*1 + full").eval()
    batch = make_batch(sentences)
    out = encoder(batch.input_ids, batch.token_mask, batch.structures, return_weights=True)
    adjacency = batch.structures["dependency"].adjacency  # (b, n, n)
    for w in out.attentions:
        assert (w[:, 0][~adjacency] == 0).all()
        assert (w[:, 1:][~adjacency[:, None].expand(-1, 2, -1, -1) & batch.token_mask[:, None, None, :]] > 0).any()


def test_padding_does_not_change_real_tokens(sentences):
    torch.manual_seed(2)
    encoder = tiny_encoder("soft_bias(dependency)@0; hard_mask(dependency)*2 + full").eval()
    together = make_batch(sentences)
    full = encoder(together.input_ids, together.token_mask, together.structures).hidden
    for k, s in enumerate(sentences):
        alone = make_batch([s])
        single = encoder(alone.input_ids, alone.token_mask, alone.structures).hidden[0]
        torch.testing.assert_close(full[k, : len(s)], single, atol=1e-5, rtol=1e-5)


def test_several_structures_feed_one_model(sentences):
    fields = {"dependency": get_provider("dependency").provides, "window": get_provider("window").provides}
    encoder = build_encoder(TINY, "soft_bias(dependency)*2 + local_global(window)", 12, fields).eval()
    assert encoder.structure_names == {"dependency", "window"}
    batch = make_batch(sentences, names=("dependency", "window"))
    assert encoder(batch.input_ids, batch.token_mask, batch.structures).hidden.shape == (3, 7, 12)
    with pytest.raises(ValueError, match=r"reads structure\(s\) \['window'\]"):
        encoder(batch.input_ids, batch.token_mask, {"dependency": batch.structures["dependency"]})


def test_build_time_field_check_names_layer_and_structure():
    fields = {"dependency": get_provider("dependency").provides}
    with pytest.raises(ValueError, match=r"'local_global' needs structure field\(s\) \['band'\].*structure 'dependency' \(layer 1"):
        build_encoder(TINY, "full@0; local_global(dependency)", 12, fields)
    with pytest.raises(ValueError, match="no structure named"):
        build_encoder(TINY, "soft_bias", 12, fields)
    with pytest.raises(ValueError, match="unknown structure 'tree'"):
        build_encoder(TINY, "soft_bias(tree)", 12, fields)
    with pytest.raises(ValueError, match="unknown attention variant 'sparse'"):
        build_encoder(TINY, "sparse", 12, fields)
    with pytest.raises(ValueError, match="bad options"):
        build_encoder(TINY, "soft_bias(dependency, nonsense=1)", 12, fields)


def test_ssan_gets_the_normed_layer_input(sentences):
    torch.manual_seed(3)
    encoder = tiny_encoder("ssan(dependency)@0; full").eval()
    seen = {}
    first = encoder.layers[0]
    first.attention.variants[0].register_forward_hook(lambda m, args, kwargs, out: seen.update(hidden=kwargs["hidden"]),
                                                      with_kwargs=True)
    first.attention_norm.register_forward_hook(lambda m, args, out: seen.update(normed=out))
    batch = make_batch(sentences)
    encoder(batch.input_ids, batch.token_mask, batch.structures)
    assert seen["hidden"] is seen["normed"]


def test_ssan_in_a_share_of_the_heads_reads_the_whole_layer_input(sentences):
    """A group of 1 of the 3 heads: its policy still reads all d_model = 12 features of ``hidden`` (it was built
    for the group's 4 and failed at the first forward)."""
    encoder = tiny_encoder("soft_bias(dependency)*2 + ssan(dependency)*1").eval()
    ssan = encoder.layers[0].attention.variants[1]
    assert ssan.d_model == TINY.d_model and ssan.policy_query.in_features == TINY.d_model
    assert ssan.policy_query.out_features == TINY.d_model // TINY.num_heads  # one head's projections
    batch = make_batch(sentences)
    out = encoder(batch.input_ids, batch.token_mask, batch.structures)
    assert torch.isfinite(out.hidden[batch.token_mask]).all()


def test_embeddings_scaled_then_positions_added(sentences):
    config = EncoderConfig(d_model=12, num_layers=1, num_heads=3, ffn_dim=20, dropout=0.0)
    encoder = build_encoder(config, "full", 12, {}).eval()
    seen = {}
    encoder.layers[0].register_forward_pre_hook(lambda m, args: seen.update(x=args[0]))
    batch = make_batch(sentences)
    encoder(batch.input_ids, batch.token_mask, {})
    expected = encoder.embedding(batch.input_ids) * math.sqrt(12) + encoder.positions(7)
    torch.testing.assert_close(seen["x"], expected)


def test_sinusoidal_formula_and_growth():
    pe = SinusoidalPositions(6)
    table = pe(100)  # grows past the initial 64
    p, k = 37, 2
    assert table.shape == (100, 6)
    assert math.isclose(table[p, 2 * k].item(), math.sin(p / 10000 ** (2 * k / 6)), abs_tol=1e-6)
    assert math.isclose(table[p, 2 * k + 1].item(), math.cos(p / 10000 ** (2 * k / 6)), abs_tol=1e-6)


def test_learned_positions_and_errors():
    learned = make_positions("learned", 8, max_len=5)
    assert learned(5).shape == (5, 8) and learned.table.requires_grad
    with pytest.raises(ValueError, match="cover 5 tokens, the batch has 6"):
        learned(6)
    assert make_positions("none", 8, 5) is None
    with pytest.raises(ValueError, match="unknown positions 'rotary'"):
        EncoderConfig(positions="rotary")


def test_structure_only_model_is_permutation_equivariant(sentences):
    """Without positions, the tree is the only order the model sees: permuting tokens together with the
    structure permutes the outputs."""
    torch.manual_seed(4)
    config = EncoderConfig(d_model=12, num_layers=2, num_heads=3, ffn_dim=20, dropout=0.0, positions="none")
    encoder = tiny_encoder("soft_bias(dependency)", config=config).eval()
    batch = make_batch(sentences[:1])
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    structure = batch.structures["dependency"]
    out = encoder(batch.input_ids, batch.token_mask, batch.structures).hidden
    permuted = encoder(batch.input_ids[:, perm], batch.token_mask[:, perm], {"dependency": structure.permute(perm)}).hidden
    torch.testing.assert_close(permuted, out[:, perm], atol=1e-5, rtol=1e-5)


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="not divisible"):
        EncoderConfig(d_model=10, num_heads=3)
    with pytest.raises(ValueError, match="dropout"):
        EncoderConfig(dropout=1.5)
    with pytest.raises(ValueError, match="num_layers must be >= 1"):
        EncoderConfig(num_layers=0)


def test_bias_tables_include_the_learned_scale(sentences):
    encoder = tiny_encoder("soft_bias(dependency, learnable_scale=True, per_head=True)*2 + full")
    module = encoder.layers[0].attention.variants[0]
    with torch.no_grad():
        module.table.uniform_(-1, 1)
        module.scale.fill_(2.0)
    (label, table), = encoder.bias_tables()[0].items()
    assert label == "0:soft_bias(dependency)" and table.shape == (2, len(module.bucket_labels()))
    torch.testing.assert_close(table, 2.0 * module.table.detach())
