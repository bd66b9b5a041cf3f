"""attach() on ModernBERT, DeBERTa-v2, ALBERT and the encoders of T5 / BART / Marian; refusals with reasons.

Tiny random configs built in code (no hub). Every equality is on the real tokens of a padded batch of three
sentences of distinct lengths, against a deep copy of the model taken before attaching (float32, atol 1e-6).
"""

from __future__ import annotations

import copy

import pytest
import torch

import structattn.hf as H
from structattn.hf import interface
from structattn.hf.collator import StructureCollator
from structattn.hf.families import find_layers
from structattn.structures import Structure
from tests.hf.conftest import ROUNDING

WIDTH, HEADS, FFN = 32, 4, 37
WINDOW = 2  # ModernBERT's half window (local_attention = 4): shorter than every test sentence


def _config(family: str, tokenizer, **extra):
    import transformers as tf

    vocab, pad = len(tokenizer), tokenizer.pad_token_id
    ids = dict(pad_token_id=pad, bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    seq2seq = dict(vocab_size=vocab, d_model=WIDTH, encoder_layers=2, decoder_layers=2, encoder_attention_heads=HEADS,
                   decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, max_position_embeddings=64,
                   dropout=0.0, attention_dropout=0.0, decoder_start_token_id=pad, **ids)
    configs = {
        "modernbert": lambda: tf.ModernBertConfig(
            vocab_size=vocab, hidden_size=WIDTH, num_hidden_layers=3, num_attention_heads=HEADS, intermediate_size=FFN,
            local_attention=2 * WINDOW, global_attn_every_n_layers=2, max_position_embeddings=128,
            cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id, **ids),
        "deberta": lambda: tf.DebertaV2Config(
            vocab_size=vocab, hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS, intermediate_size=FFN,
            relative_attention=True, pos_att_type=["c2p", "p2c"], position_buckets=8, max_relative_positions=32,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=128, pad_token_id=pad),
        "albert": lambda: tf.AlbertConfig(
            vocab_size=vocab, embedding_size=16, hidden_size=WIDTH, num_hidden_layers=3, num_attention_heads=HEADS,
            intermediate_size=FFN, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **ids),
        "t5": lambda: tf.T5Config(vocab_size=vocab, d_model=WIDTH, d_kv=8, d_ff=FFN, num_layers=2, num_heads=HEADS,
                                  dropout_rate=0.0, decoder_start_token_id=pad, **ids),
        "bart": lambda: tf.BartConfig(**seq2seq),
        "marian": lambda: tf.MarianConfig(**seq2seq),
    }
    config = configs[family]()
    for key, value in extra.items():
        setattr(config, key, value)
    return config


MODEL_CLASSES = {"modernbert": "ModernBertModel", "deberta": "DebertaV2Model", "albert": "AlbertModel",
                 "t5": "T5EncoderModel", "bart": "BartModel", "marian": "MarianMTModel"}


def _model(family: str, tokenizer, cls: str | None = None, seed: int = 0, **extra):
    import transformers as tf

    torch.manual_seed(seed)
    return getattr(tf, cls or MODEL_CLASSES[family])(_config(family, tokenizer, **extra)).eval()


def _batch(tokenizer, sentences, token_types: bool = True):
    batch = StructureCollator(tokenizer)(sentences)
    assert batch["attention_mask"].sum(-1).unique().numel() == 3  # padding in the batch
    return batch if token_types else {k: v for k, v in batch.items() if k != "token_type_ids"}


def _plain(batch):
    return {k: v for k, v in batch.items() if k != "structures"}


def _states(model, batch):
    """The real tokens' last hidden states (an encoder-decoder model: its encoder's)."""
    model = model.base_model
    if getattr(model.config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()
    return model(**batch).last_hidden_state[batch["attention_mask"].bool()]


def _everything_near(batch, name="near"):
    """A structure where every real pair is 0 hops apart (a hard mask of any radius allows everything)."""
    real = batch["attention_mask"].bool()
    pair = real[:, :, None] & real[:, None, :]
    distance = torch.where(pair, 0, -1)
    return {**batch, "structures": {name: Structure(distance=distance, adjacency=pair, token_mask=real)}}


def _loss(states):
    weights = torch.randn(states.shape[-1], generator=torch.Generator().manual_seed(0))
    return (states @ weights).pow(2).mean()


def _assert_zero_bias_equals_unattached(model, batch, plan="soft_bias(dependency)"):
    reference = copy.deepcopy(model)
    H.attach(model, plan)
    with torch.no_grad():
        got, want = _states(model, batch), _states(reference, _plain(batch))
    torch.testing.assert_close(got, want, **ROUNDING)  # T5's unscaled scores reach ~1.4
    with torch.no_grad():  # and the variants did run: a non-zero table moves the outputs
        for attached in H.attached_layers(model).values():
            attached.variants[0].table.normal_(generator=torch.Generator().manual_seed(1))
        assert (_states(model, batch) - want).abs().max() > 1e-3


def _train_save_load(model, batch, plan, tmp_path, steps=3):
    """A few Adam steps (the tables move), save_pretrained, structattn's from_pretrained: outputs equal.

    Adam, not SGD: its steps are bounded by lr whatever the gradient's scale. SGD at lr 0.5 on this unbounded
    loss diverged now and then (loss 45 -> 1e4 -> 1e7, gradient norm up to inf at the third step: NaN weights),
    depending on the process's trained tokenizer ids."""
    H.attach(model, plan)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    tables = [a.variants[0].table for a in H.attached_layers(model).values()]
    for _ in range(steps):
        optimizer.zero_grad()
        _loss(_states(model, batch)).backward()
        optimizer.step()
    assert all(t.abs().max() > 0 for t in tables)
    model.eval().save_pretrained(tmp_path)
    loaded = H.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model) and sorted(H.attached_layers(loaded)) == sorted(H.attached_layers(model))
    with torch.no_grad():
        torch.testing.assert_close(_states(loaded, batch), _states(model, batch), atol=1e-6, rtol=0)
    return loaded


# -- ModernBERT ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("base", ["sdpa", "eager"])
def test_modernbert_zero_soft_bias_equals_unattached(base, tokenizer, short_sentences):
    model = _model("modernbert", tokenizer)
    model.set_attn_implementation(base)
    assert [layer.attention_type for layer in model.layers] == ["full_attention", "sliding_attention", "full_attention"]
    _assert_zero_bias_equals_unattached(model, _batch(tokenizer, short_sentences, token_types=False))


def test_modernbert_keeps_the_sliding_window(tokenizer, short_sentences):
    """A hard mask that allows every pair still leaves the local layer's window: equal to the unattached model,
    whose window (2 tokens each side) is shorter than every sentence, so dropping it would change the output."""
    model = _model("modernbert", tokenizer)
    reference = copy.deepcopy(model)
    H.attach(model, "hard_mask(near, radius=1000)", structure_fields={"near": {"distance", "adjacency", "token_mask"}})
    batch = _everything_near(_batch(tokenizer, short_sentences, token_types=False))
    with torch.no_grad():
        torch.testing.assert_close(_states(model, batch), _states(reference, _plain(batch)), **ROUNDING)


def test_modernbert_hard_mask_weights_inside_radius_and_window(tokenizer, short_sentences):
    model = _model("modernbert", tokenizer)
    model.set_attn_implementation("eager")
    H.attach(model, "hard_mask(dependency, radius=2)")
    batch = _batch(tokenizer, short_sentences, token_types=False)
    with torch.no_grad():
        weights = model(**batch, output_attentions=True).attentions  # per layer (b, h, n, n)
    distance = batch["structures"]["dependency"].distance
    real = batch["attention_mask"].bool()
    n = distance.shape[-1]
    positions = torch.arange(n)
    near = (distance >= 0) & (distance <= 2)  # (b, n, n)
    window = (positions[:, None] - positions[None, :]).abs() <= WINDOW
    for layer, w in enumerate(weights):
        allowed = near & window if layer == 1 else near
        assert w.masked_select(~allowed[:, None]).abs().max() == 0, f"layer {layer}"
        torch.testing.assert_close(w.sum(-1)[real[:, None].expand_as(w[..., 0])], torch.ones(int(real.sum()) * HEADS))
    assert weights[0].masked_select((near & ~window)[:, None]).abs().max() > 0  # global layers reach further
    assert (near & ~window).any()


def test_modernbert_ssan_refused_on_local_layers_only(tokenizer):
    with pytest.raises(ValueError, match=r"layer 1, group 'ssan\(dependency\)'.*sliding window"):
        H.attach(_model("modernbert", tokenizer), "ssan(dependency)")
    H.attach(_model("modernbert", tokenizer), "ssan(dependency)@0,2; full")  # global layers take any variant


def test_modernbert_trained_round_trip(tmp_path, tokenizer, short_sentences):
    batch = _batch(tokenizer, short_sentences, token_types=False)
    _train_save_load(_model("modernbert", tokenizer, cls="ModernBertForMaskedLM"), batch,
                     "soft_bias(dependency, per_head=True)@0-1; full", tmp_path)


# -- DeBERTa-v2 ---------------------------------------------------------------------------------------------

def test_deberta_zero_soft_bias_equals_unattached(tokenizer, short_sentences):
    model = _model("deberta", tokenizer)
    assert model.encoder.rel_embeddings.weight.abs().max() > 0  # c2p / p2c terms are not zero
    _assert_zero_bias_equals_unattached(model, _batch(tokenizer, short_sentences))
    attention = model.encoder.layer[0].attention.self
    assert type(attention).__name__ == "StructuredDisentangledSelfAttention"
    assert type(attention).__mro__[1].__name__ == "DisentangledSelfAttention"


def test_deberta_head_split_and_untouched_full_layer(tokenizer, short_sentences):
    model = _model("deberta", tokenizer)
    _assert_zero_bias_equals_unattached(model, _batch(tokenizer, short_sentences),
                                        plan="soft_bias(dependency)*2 + full*2@0; full")
    assert type(model.encoder.layer[1].attention.self).__name__ == "DisentangledSelfAttention"


def test_deberta_all_allowing_hard_mask_and_weights(tokenizer, short_sentences):
    model = _model("deberta", tokenizer)
    reference = copy.deepcopy(model)
    H.attach(model, "hard_mask(near, radius=1000)@0; hard_mask(dependency, radius=1)@1",
             structure_fields={"near": {"distance", "adjacency", "token_mask"}})
    batch = _batch(tokenizer, short_sentences)
    batch["structures"].update(_everything_near(batch)["structures"])
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
        want = reference(**_plain(batch), output_attentions=True)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(out.attentions[0].transpose(1, 2)[real], want.attentions[0].transpose(1, 2)[real],
                               atol=1e-6, rtol=0)  # real query rows (b, h, i, j) -> (real i, h, j)
    distance = batch["structures"]["dependency"].distance
    far = ~((distance >= 0) & (distance <= 1))
    assert out.attentions[1].masked_select(far[:, None]).abs().max() == 0
    assert want.attentions[1].masked_select((far & real[:, None, :])[:, None]).abs().max() > 0


def test_deberta_structures_keyword_is_scoped_to_the_call(tokenizer, short_sentences):
    model = _model("deberta", tokenizer)
    H.attach(model, "soft_bias(dependency)")
    batch = _batch(tokenizer, short_sentences)
    with torch.no_grad():
        model(**batch)
        assert interface.active_structures() is None
        with pytest.raises(ValueError, match=r"layer 0.*'dependency'"):
            model(**_plain(batch))
        assert interface.active_structures() is None  # restored after an error too
        with H.structures(model, batch["structures"]):
            torch.testing.assert_close(model(**_plain(batch)).last_hidden_state, model(**batch).last_hidden_state)


def test_deberta_refuses_variants_that_cannot_keep_its_scores(tokenizer):
    with pytest.raises(ValueError, match="disentangled c2p/p2c"):
        H.attach(_model("deberta", tokenizer), "ssan(dependency)*2 + full*2")


def test_deberta_trained_round_trip(tmp_path, tokenizer, short_sentences):
    loaded = _train_save_load(_model("deberta", tokenizer, cls="DebertaV2ForMaskedLM"),
                              _batch(tokenizer, short_sentences), "soft_bias(dependency)@1; full", tmp_path)
    assert type(loaded.deberta.encoder.layer[1].attention.self).__name__ == "StructuredDisentangledSelfAttention"


# -- ALBERT -------------------------------------------------------------------------------------------------

def test_albert_zero_soft_bias_equals_unattached(tokenizer, short_sentences):
    model = _model("albert", tokenizer)
    _assert_zero_bias_equals_unattached(model, _batch(tokenizer, short_sentences))
    assert sorted(H.attached_layers(model)) == [0]  # one shared module for three layers


def test_albert_per_layer_plan_is_refused(tokenizer):
    model = _model("albert", tokenizer)
    with pytest.raises(ValueError, match=r"gives layer 1 other attention than layer 0.*share their weights"):
        H.attach(model, "soft_bias(dependency)@0; full")
    assert H.attached_layers(model) == {}


def test_albert_trained_round_trip(tmp_path, tokenizer, short_sentences):
    _train_save_load(_model("albert", tokenizer, cls="AlbertForMaskedLM"), _batch(tokenizer, short_sentences),
                     "soft_bias(dependency)", tmp_path)


# -- encoders of translation models -------------------------------------------------------------------------

@pytest.mark.parametrize("family, cls", [("t5", "T5EncoderModel"), ("t5", "T5ForConditionalGeneration"),
                                         ("bart", "BartModel"), ("marian", "MarianMTModel")])
def test_encoder_zero_soft_bias_equals_unattached(family, cls, tokenizer, short_sentences):
    model = _model(family, tokenizer, cls=cls)
    _assert_zero_bias_equals_unattached(model, _batch(tokenizer, short_sentences, token_types=False))
    assert len(H.attached_layers(model)) == 2
    if cls != "T5EncoderModel":  # the decoder is never attached
        decoder = [m for name, m in model.named_modules() if ".decoder." in f".{name}."]
        assert decoder and not any(hasattr(m, "structattn") for m in decoder)


def test_t5_relative_position_bias_is_kept(tokenizer, short_sentences):
    """An all-allowing hard mask over T5's (scaling 1) scores with its position bias equals the unattached
    encoder, and the bias matters: without it the output differs."""
    model = _model("t5", tokenizer)
    assert model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.abs().max() > 0
    reference = copy.deepcopy(model)
    H.attach(model, "hard_mask(near, radius=1000)", structure_fields={"near": {"distance", "adjacency", "token_mask"}})
    batch = _everything_near(_batch(tokenizer, short_sentences, token_types=False))
    with torch.no_grad():
        want = _states(reference, _plain(batch))
        torch.testing.assert_close(_states(model, batch), want, **ROUNDING)
        reference.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.zero_()
        assert (_states(reference, _plain(batch)) - want).abs().max() > 1e-3


def test_seq2seq_encoder_attached_directly_and_saved(tmp_path, tokenizer, short_sentences):
    """attach(model.get_encoder()) or the whole translation model; the whole model saves and loads."""
    model = _model("bart", tokenizer)
    H.attach(model.get_encoder(), "soft_bias(dependency)@0; full")
    assert sorted(H.attached_layers(model.get_encoder())) == [0]
    _train_save_load(_model("marian", tokenizer), _batch(tokenizer, short_sentences, token_types=False),
                     "soft_bias(dependency)", tmp_path, steps=2)


# -- refusals -----------------------------------------------------------------------------------------------

def test_decoder_only_model_is_refused_at_attach_time():
    import transformers as tf

    model = tf.GPT2Model(tf.GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0))
    with pytest.raises(ValueError, match=r"refuses GPT2Model: its self-attention is causal"):
        H.attach(model, "soft_bias(dependency)")


def test_is_decoder_config_is_refused_at_attach_time(tokenizer):
    from tests.hf.conftest import tiny_model

    model = tiny_model("bert", tokenizer, is_decoder=True)
    with pytest.raises(ValueError, match=r"refuses BertModel: config.is_decoder=True.*causal"):
        H.attach(model, "soft_bias(dependency)")
    assert model.config._attn_implementation == "sdpa" and not hasattr(model.config, "structattn")
    t5 = _model("t5", tokenizer, cls="T5Model")
    with pytest.raises(ValueError, match="causal"):
        H.attach(t5.get_decoder(), "soft_bias(dependency)")


def test_deberta_v1_is_refused_with_the_reason():
    import transformers as tf

    model = tf.DebertaModel(tf.DebertaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                             intermediate_size=37))
    with pytest.raises(ValueError, match=r"DebertaModel.*DeBERTa \(v1\).*outside transformers' AttentionInterface"):
        H.attach(model, "soft_bias(dependency)")


def test_supported_families_and_layers():
    assert {"ModernBERT", "DeBERTa-v2", "ALBERT", "T5 (encoder)", "BART (encoder)", "Marian (encoder)",
            "BERT"} <= set(H.supported_families())


def test_find_layers_of_an_encoder_decoder_model_is_the_encoder(tokenizer):
    model = _model("t5", tokenizer, cls="T5Model")
    found = find_layers(model)
    assert found.stack is model.get_encoder() and found.family.name == "T5 (encoder)" and len(found.modules) == 2


def test_t5_eager_weights_through_the_whole_model(tokenizer, short_sentences):
    """eager_attention() switches the encoder stack (T5's has its own config); hard-mask weights vanish beyond
    the radius; T5 has no position table, so its length limit is none."""
    from structattn.hf.families import NO_POSITION_LIMIT, max_tokens

    model = _model("t5", tokenizer, cls="T5Model")
    assert max_tokens(model) == NO_POSITION_LIMIT
    H.attach(model, "hard_mask(dependency, radius=1)@0; full")
    batch = _batch(tokenizer, short_sentences, token_types=False)
    with torch.no_grad(), interface.eager_attention(model):
        assert model.get_encoder().config._attn_implementation == "structattn_eager"
        weights = model.get_encoder()(**batch, output_attentions=True).attentions
    assert model.get_encoder().config._attn_implementation == "structattn_sdpa"
    distance = batch["structures"]["dependency"].distance
    far = ~((distance >= 0) & (distance <= 1))
    assert weights[0].masked_select(far[:, None]).abs().max() == 0
    assert weights[1].masked_select((far & batch["attention_mask"].bool()[:, None, :])[:, None]).abs().max() > 0
