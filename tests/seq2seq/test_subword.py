"""Subword vocabularies from HF ``tokenizers``: the Vocab interface, round trips, checkpoints, training on the
train split only, and word trees reaching the pieces through ``align_to_subwords``."""

import json
from pathlib import Path

import pytest

from structattn.encoders import ChunkSplitter, Vocab
from structattn.seq2seq import vocab as target_vocabs
from structattn.seq2seq.subword import SubwordVocab, vocab_from_dict
from structattn.structures import get_provider
from structattn.structures.alignment import align_to_subwords
from structattn.tasks.base import get_task

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "multi30k_small"


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """The fixture's en -> de pairs (parses cached in a temporary folder)."""
    task = get_task("translation_multi30k", path=str(FIXTURE), cache_dir=str(tmp_path_factory.mktemp("cache")))
    return task, task.splits()


def sentences(task, items):
    return [task.inputs(x) for x in items] + [task.label(x) for x in items]


@pytest.fixture(scope="module")
def joint(splits):
    task, data = splits
    return SubwordVocab.train(sentences(task, data["train"]), vocab_size=400)


def chars(words_lists):
    return {c for words in words_lists for w in words for c in w}


def test_specials_and_vocab_interface(joint):
    assert joint.itos[:4] == ["<pad>", "<unk>", "<s>", "</s>"] and target_vocabs.special_ids(joint) == (2, 3)
    assert len(joint) == len(joint.itos) == joint.splitter.tokenizer.get_vocab_size() <= 400
    assert all(joint.stoi[t] == i for i, t in enumerate(joint.itos))
    assert isinstance(joint, Vocab) and joint.splitter is not None and joint.lowercase is False


def test_round_trip_on_train_words(splits, joint):
    task, data = splits
    for words in sentences(task, data["train"]):
        ids, word_ids = joint.encode(words)
        assert 1 not in ids  # every character was seen in training
        assert word_ids == sorted(word_ids) and set(word_ids) == set(range(len(words)))
        assert joint.detokenize(ids) == list(words)
        assert target_vocabs.detokenize(ids, joint) == " ".join(words)  # the ## convention the decoder output uses
        assert ids == [joint.stoi[p] for w in words for p in joint.pieces(w)]
    assert any(len(joint.pieces(w)) > 1 for words in sentences(task, data["test"]) for w in words)


def test_detokenize_drops_specials_and_keeps_unknowns(joint):
    ids, _ = joint.encode(["Ein", "Hund", "Ω"])
    assert 1 in ids
    assert joint.detokenize([2] + ids + [3, 0, 0]) == ["Ein", "Hund", "<unk>"]
    assert joint.detokenize([len(joint) + 5]) == ["<unk>"]


def test_trained_on_train_only(splits, joint):
    task, data = splits
    train_chars = chars(sentences(task, data["train"]))
    pieces = [p.removeprefix("##") for p in joint.itos[4:]]
    assert chars([pieces]) <= train_chars
    unseen = sorted(chars(sentences(task, data["dev"] + data["test"])) - train_chars)
    assert unseen, "the fixture's dev/test should hold a character that train lacks"
    word = unseen[0] * 2
    assert joint.encode([word])[0] and set(joint.encode([word])[0]) <= {1, joint.stoi[""]}


def test_to_dict_from_dict_identity(splits, joint):
    task, data = splits
    data_dict = joint.to_dict()
    json.dumps(data_dict)  # plain values for checkpoints
    loaded = vocab_from_dict(json.loads(json.dumps(data_dict)))
    assert isinstance(loaded, SubwordVocab) and loaded.to_dict() == data_dict and loaded.itos == joint.itos
    for words in sentences(task, data["test"]):
        assert loaded.encode(words) == joint.encode(words)
    plain = Vocab(["a", "b"], lowercase=True, splitter=ChunkSplitter(2))
    assert vocab_from_dict(plain.to_dict()).to_dict() == plain.to_dict()
    with pytest.raises(ValueError, match="not a subword vocabulary dict"):
        SubwordVocab.from_dict(plain.to_dict())


def test_bpe_is_deterministic_and_unigram_round_trips(splits, joint):
    task, data = splits
    assert SubwordVocab.train(sentences(task, data["train"]), vocab_size=400).to_dict() == joint.to_dict()
    unigram = SubwordVocab.train(sentences(task, data["train"]), vocab_size=300, model="unigram")
    assert unigram.itos[:4] == ["<pad>", "<unk>", "<s>", "</s>"] and unigram.to_dict()["model"] == "unigram"
    for words in sentences(task, data["train"])[:30]:
        ids, _ = unigram.encode(words)
        assert unigram.detokenize(ids) == list(words)
    assert vocab_from_dict(unigram.to_dict()).itos == unigram.itos


def test_lowercase_option():
    vocab = SubwordVocab.train([["Dogs", "run", "."], ["dogs", "sleep", "."]] * 3, vocab_size=60, lowercase=True)
    assert vocab.encode(["DOGS"]) == vocab.encode(["dogs"]) and vocab.lowercase
    assert vocab.detokenize(vocab.encode(["Dogs", "run"])[0]) == ["dogs", "run"]
    assert target_vocabs.reference_text(["Dogs"], vocab) == "dogs"


@pytest.mark.parametrize("options,expected", [
    ({"model": "wordpiece"}, r"subword model must be one of \['bpe', 'unigram'\], got 'wordpiece'"),
    ({"vocab_size": 4}, "vocab_size must be > 4"),
])
def test_bad_training_options(options, expected):
    with pytest.raises(ValueError, match=expected):
        SubwordVocab.train([["a", "b"]], **options)


def test_no_words_and_foreign_tokenizers_are_refused():
    with pytest.raises(ValueError, match="no words to train on"):
        SubwordVocab.train([[], []])
    with pytest.raises(TypeError, match=r"trained with SubwordVocab.train\(sentences, vocab_size=...\), not built"):
        SubwordVocab.build([["a"]])
    from tokenizers import Tokenizer, models

    foreign = Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>"))
    with pytest.raises(ValueError, match=r"ids 0-3 must be \['<pad>', '<unk>', '<s>', '</s>'\], got \['a', '<unk>'\]"):
        SubwordVocab(foreign.to_str())


def test_word_tree_reaches_the_pieces(splits, joint):
    _, data = splits
    item = max(data["train"], key=lambda x: sum(len(joint.pieces(w)) for w in x.words) - len(x))
    structure = get_provider("dependency")(item)
    ids, word_ids = joint.encode(item.words)
    assert len(ids) > len(item)  # some word is cut into pieces
    aligned = align_to_subwords(structure, word_ids)
    assert aligned.distance.shape == (len(ids), len(ids))
    for s in range(len(ids)):
        for t in range(len(ids)):
            expected = 0 if word_ids[s] == word_ids[t] else int(structure.distance[word_ids[s], word_ids[t]])
            assert int(aligned.distance[s, t]) == expected


def test_encode_items_aligns_structures_to_pieces(splits, joint):
    from structattn.training.data import encode_items

    task, data = splits
    examples = encode_items(data["dev"][:5], task, joint, {"dependency": get_provider("dependency")}, quiet=True)
    for example, item in zip(examples, data["dev"][:5]):
        assert example.word_ids == joint.encode(item.words)[1]
        assert example.structures["dependency"].distance.shape == (len(example), len(example))
