"""Task heads and the encoder + head model, at word level and with subword tokens."""

import random

import pytest
import torch

from structattn.encoders import Batch, PairScorer, SentenceClassifier, TaskModel, TokenTagger, make_head
from structattn.structures import get_provider
from structattn.structures.alignment import align_to_subwords
from structattn.structures.collate import collate
from tests.encoders.util import make_batch, random_sentence, tiny_encoder


def test_sentence_pooling_ignores_padding():
    torch.manual_seed(0)
    hidden = torch.randn(2, 5, 4)
    word_mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    for pooling in ("mean", "max", "first"):
        head = SentenceClassifier(4, 3, pooling=pooling)
        garbage = hidden.clone()
        garbage[1, 2:] = 1e4
        torch.testing.assert_close(head(hidden, word_mask), head(garbage, word_mask))
        assert head(hidden, word_mask).shape == (2, 3)
    mean = SentenceClassifier(4, 3, pooling="mean")
    expected = mean.classify(hidden[1, :2].mean(0))
    torch.testing.assert_close(mean(hidden, word_mask)[1], expected)
    with pytest.raises(ValueError, match="unknown pooling"):
        SentenceClassifier(4, 3, pooling="attention")


def test_token_tagger_and_pair_scorer_shapes_and_masking():
    torch.manual_seed(0)
    hidden = torch.randn(2, 5, 4)
    word_mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    assert TokenTagger(4, 6)(hidden, word_mask).shape == (2, 5, 6)
    scores = PairScorer(4)(hidden, word_mask)
    assert scores.shape == (2, 5, 5) and torch.isfinite(scores).all()
    probs = scores.softmax(-1)
    assert (probs[1, :, 3:] == 0).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 5))
    assert isinstance(make_head("pair", 4, 0), PairScorer)
    with pytest.raises(ValueError, match="unknown head kind"):
        make_head("span", 4, 2)


def test_word_starts_from_word_ids():
    ids = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 9, 0, 0]])
    word_ids = torch.tensor([[0, 0, 1, 2, -1], [0, 1, 1, -1, -1]])
    starts, word_mask = Batch(ids, ids > 0, word_ids=word_ids).word_starts
    assert starts.tolist() == [[0, 2, 3], [0, 1, 4]]
    assert word_mask.tolist() == [[True, True, True], [True, True, False]]
    plain_starts, plain_mask = Batch(ids, ids > 0).word_starts
    assert plain_starts.tolist() == [list(range(5))] * 2 and plain_mask.tolist() == (ids > 0).tolist()


def test_subword_model_reads_first_piece_of_each_word():
    """A sentence split into subwords (structure aligned to the pieces) gives word-level logits that equal
    reading the encoder output at each word's first piece."""
    torch.manual_seed(0)
    sentence = random_sentence(4, random.Random(1))
    word_ids = [0, 0, 1, 2, 2, 2, 3]
    structure = collate([align_to_subwords(get_provider("dependency")(sentence), word_ids)])
    ids = torch.tensor([[2, 3, 4, 5, 6, 7, 8]])
    batch = Batch(ids, ids > 0, {"dependency": structure}, word_ids=torch.tensor([word_ids]))
    encoder = tiny_encoder("hard_mask(dependency)").eval()
    model = TaskModel(encoder, TokenTagger(12, 5)).eval()
    logits, out = model.run(batch)
    assert logits.shape == (1, 4, 5)
    torch.testing.assert_close(logits[0], model.head(out.hidden[0, [0, 2, 3, 6]][None], torch.ones(1, 4, dtype=torch.bool))[0])


def test_task_model_word_level_matches_encoder():
    torch.manual_seed(0)
    rng = random.Random(2)
    batch = make_batch([random_sentence(5, rng), random_sentence(3, rng)])
    model = TaskModel(tiny_encoder("full"), PairScorer(12)).eval()
    logits, out = model.run(batch, return_weights=True)
    assert logits.shape == (2, 5, 5) and len(out.attentions) == 2
    torch.testing.assert_close(logits, model.head(out.hidden, batch.token_mask))
