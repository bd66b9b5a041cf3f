"""The encoder-decoder: causality of the decoder, padding invariance of the memory, shapes, tied weights."""

import pytest
import torch

from structattn.seq2seq import Seq2SeqOptions, pair_batch, source_batch
from tests.seq2seq.helpers import BOS, EOS, random_pairs, tiny_model


def test_shapes_and_loss():
    model = tiny_model()
    batch = pair_batch(random_pairs(2), BOS, EOS)
    logits = model(batch)
    b, t = batch.target_in.shape
    assert logits.shape == (b, t, 13)
    loss = model.loss(batch, label_smoothing=0.1)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_decoder_is_causal():
    model = tiny_model()
    batch = pair_batch(random_pairs(2), BOS, EOS)
    before = model(batch)
    t = batch.target_in.shape[1]
    for position in range(1, t):
        changed = batch.target_in.clone()
        changed[:, position] = (changed[:, position] + 1) % 13
        after = model(type(batch)(batch.source, changed, batch.target_out))
        torch.testing.assert_close(after[:, :position], before[:, :position], rtol=0, atol=1e-12)
        assert not torch.allclose(after[:, position], before[:, position])


def test_memory_is_padding_invariant():
    model = tiny_model()
    pairs = random_pairs(3)
    alone = [model.encode(source_batch([p]))[0][0] for p in pairs]
    batch = source_batch(pairs)
    batch.input_ids[~batch.token_mask] = 7  # garbage ids on padding (never pad 0-only: that hides bugs)
    memory, mask = model.encode(batch)
    for k, p in enumerate(pairs):
        torch.testing.assert_close(memory[k, : len(p)], alone[k], rtol=0, atol=1e-10)
        assert not mask[k, len(p):].any()


def test_decoder_logits_ignore_source_padding():
    model = tiny_model()
    pairs = random_pairs(3)
    batch = pair_batch(pairs, BOS, EOS)
    together = model(batch)
    for k, p in enumerate(pairs):
        single = model(pair_batch([p], BOS, EOS))
        torch.testing.assert_close(together[k, : single.shape[1]], single[0], rtol=0, atol=1e-10)


@pytest.mark.parametrize("shared, tie", [(False, False), (False, True), (True, True)])
def test_tied_embeddings(shared, tie):
    model = tiny_model(shared=shared, tie=tie)
    assert (model.decoder.output.weight is model.decoder.embedding.weight) == tie
    assert (model.encoder.embedding.weight is model.decoder.embedding.weight) == shared


def test_shared_vocab_needs_one_size():
    from structattn.encoders import EncoderConfig
    from structattn.seq2seq import build_seq2seq

    with pytest.raises(ValueError, match="shared_vocab"):
        build_seq2seq(EncoderConfig(16, 1, 2, 16), Seq2SeqOptions(shared_vocab=True), "full", 10, 12, {}, BOS, EOS)


@pytest.mark.parametrize("bad", [{"beam": 0}, {"label_smoothing": 1.0}, {"decoder_layers": 0}, {"max_len_b": 0}])
def test_options_reject_bad_values(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        Seq2SeqOptions(**bad)
