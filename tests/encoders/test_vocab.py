"""Word-level and subword vocabularies."""

import pytest

from structattn.encoders import ChunkSplitter, Vocab


def test_word_vocab_frequency_order_unknown_and_lowercase():
    vocab = Vocab.build([["The", "cat"], ["the", "dog"], ["a", "cat"]], min_freq=1)
    assert vocab.itos[:4] == ["<pad>", "<unk>", "cat", "the"]  # most frequent first, ties alphabetical
    ids, word_ids = vocab.encode(["THE", "cat", "zebra"])
    assert ids == [vocab.stoi["the"], vocab.stoi["cat"], 1] and word_ids is None
    rare = Vocab.build([["a", "b", "b"]], min_freq=2)
    assert rare.itos == ["<pad>", "<unk>", "b"]
    assert len(Vocab.build([["a", "b", "b", "c"]], max_size=1)) == 3


def test_subword_vocab_maps_tokens_to_words():
    splitter = ChunkSplitter(3)
    assert splitter("nejlepší") == ["nej", "##lep", "##ší"]
    assert splitter("a") == ["a"]
    vocab = Vocab.build([["nejlepší", "den"]], splitter=splitter)
    ids, word_ids = vocab.encode(["den", "nejlepší", "dny"])
    assert word_ids == [0, 1, 1, 1, 2]
    assert ids[:4] == [vocab.stoi["den"], vocab.stoi["nej"], vocab.stoi["##lep"], vocab.stoi["##ší"]] and ids[4] == 1
    with pytest.raises(ValueError, match="max_chars must be >= 1"):
        ChunkSplitter(0)


def test_round_trip():
    for splitter in (None, ChunkSplitter(2)):
        vocab = Vocab.build([["Ab", "cde"]], lowercase=False, splitter=splitter)
        again = Vocab.from_dict(vocab.to_dict())
        assert again.itos == vocab.itos and again.encode(["Ab", "x"]) == vocab.encode(["Ab", "x"])
