"""StructureCollator: token-level structures follow the words; segmentation mismatches are refused."""

from __future__ import annotations

import networkx as nx
import pytest
import torch

from structattn.hf.collator import StructureCollator
from structattn.structures import Sentence


def _word_distances(sentence):
    """Tree distances between words via networkx (the oracle shares no code with the providers)."""
    graph = nx.Graph()
    graph.add_nodes_from(range(len(sentence)))
    graph.add_edges_from((i, h) for i, h in enumerate(sentence.heads) if h >= 0)
    return dict(nx.all_pairs_shortest_path_length(graph))


def test_tokens_inherit_their_words_distances(tokenizer, short_sentences):
    encoded = StructureCollator(tokenizer).encode(short_sentences)
    batch = encoded.batch
    structure = batch["structures"]["dependency"]
    assert set(batch) >= {"input_ids", "attention_mask", "structures"}
    assert structure.token_mask.shape == batch["input_ids"].shape
    assert torch.equal(structure.token_mask, batch["attention_mask"].bool())
    for k, sentence in enumerate(short_sentences):
        gold, ids = _word_distances(sentence), encoded.word_ids[k]
        assert sorted({w for w in ids if w is not None}) == list(range(len(sentence)))
        for t, wt in enumerate(ids):
            for u, wu in enumerate(ids):
                want = 0 if t == u else (-1 if wt is None or wu is None else gold[wt][wu])
                assert int(structure.distance[k, t, u]) == want, (sentence.id, t, u)


def test_first_subtokens_point_at_each_words_first_piece(tokenizer, short_sentences):
    encoded = StructureCollator(tokenizer).encode(short_sentences)
    index, word_mask = encoded.first_subtokens()
    assert word_mask.sum(-1).tolist() == [len(s) for s in short_sentences]
    for k, sentence in enumerate(short_sentences):
        for w in range(len(sentence)):
            t = int(index[k, w])
            assert encoded.word_ids[k][t] == w and (t == 0 or encoded.word_ids[k][t - 1] != w)


def test_word_without_token_is_refused_by_name(tokenizer):
    sentence = Sentence(words=["Praha", "\u200b", "je"], heads=[-1, 0, 0], id="zero-width")
    with pytest.raises(ValueError, match=r"'zero-width'.*word 1"):
        StructureCollator(tokenizer)([sentence])


def test_too_long_sentence_is_refused_by_name(tokenizer, short_sentences):
    with pytest.raises(ValueError, match=repr(short_sentences[0].id)):
        StructureCollator(tokenizer, max_length=5)(short_sentences)


def test_slow_tokenizer_and_left_padding_are_refused(tokenizer):
    class Slow:
        is_fast = False

    with pytest.raises(ValueError, match="fast tokenizer"):
        StructureCollator(Slow())
    tokenizer.padding_side = "left"
    try:
        with pytest.raises(ValueError, match="left"):
            StructureCollator(tokenizer)
    finally:
        tokenizer.padding_side = "right"


@pytest.mark.parametrize("ids, message", [
    ([None, 0, 2, None], "word id 2, but the sentence has 2 words"),
    ([None, 1, 0, None], "reorders words"),
    ([None, 0, 0, None], r"word 1 \('b'\) has no token"),
])
def test_check_tokenization_refuses_what_the_structure_cannot_follow(ids, message):
    from structattn.hf.collator import check_tokenization

    with pytest.raises(ValueError, match=message):
        check_tokenization(["a", "b"], ids, "sentence 'x'", None)
    check_tokenization(["a", "b"], [None, 0, 1, 1, None], "sentence 'x'", 5)  # a good one passes


def test_window_structures_are_built_on_the_tokens(tokenizer, short_sentences):
    from structattn.structures import get_provider

    batch = StructureCollator(tokenizer, providers={"window": get_provider("window", radius=2, global_tokens=[0])})(short_sentences)
    window = batch["structures"]["window"]
    assert window.window_radius == 2 and torch.equal(window.token_mask, batch["attention_mask"].bool())
    distance = window.dense_distance()
    n = int(batch["attention_mask"][0].sum())
    assert int(distance[0, 3, 5]) == 2 and int(distance[0, 3, 6]) == -1 and int(distance[0, 0, n - 1]) >= 0  # [CLS] global


def test_local_global_attached_over_token_windows(tokenizer, short_sentences):
    import structattn.hf as H
    from structattn.structures import get_provider
    from tests.hf.conftest import tiny_model

    model = tiny_model("bert", tokenizer)
    H.attach(model, "local_global(window)@0; full")
    collate = StructureCollator(tokenizer, providers={"window": get_provider("window", radius=2, global_tokens=[0])})
    with torch.no_grad():
        out = model(**collate(short_sentences)).last_hidden_state
    assert torch.isfinite(out).all()


def test_truncation_keeps_the_whole_sentences_distances(tokenizer, treebank):
    long = [s for s in treebank if len(s) > 20][:2]
    encoded = StructureCollator(tokenizer, max_length=12, truncation=True).encode(long)
    batch = encoded.batch
    assert batch["input_ids"].shape[1] == 12
    structure = batch["structures"]["dependency"]
    for k, sentence in enumerate(long):
        gold, ids = _word_distances(sentence), encoded.word_ids[k]
        for t, wt in enumerate(ids):
            for u, wu in enumerate(ids):
                if t != u and wt is not None and wu is not None:
                    assert int(structure.distance[k, t, u]) == gold[wt][wu]
    with pytest.raises(ValueError, match="more than the model's 12"):
        StructureCollator(tokenizer, max_length=12)(long)


def _words_of_tokens(tokenizer, count: int) -> list[str]:
    """``count`` words of one token each (a single-piece vocabulary entry repeated)."""
    word = next(w for w in ("the", "a", "of", "je", "a", "v") if len(tokenizer.tokenize(w)) == 1)
    return [word] * count


def _chain(words: list[str], id: str) -> Sentence:
    return Sentence(words=words, heads=[-1] + list(range(len(words) - 1)), id=id)


def test_position_limit_of_the_model_folder_applies_without_max_length(tmp_path, tokenizer):
    """A tokenizer saved without a length (``train_wordpiece`` sets none) beside a model with 128 positions:
    the collator reads the folder's config.json, so the long sentence is refused by name, not left to crash
    inside the position embeddings."""
    from transformers import AutoTokenizer

    from tests.hf.conftest import tiny_model

    tiny_model("bert", tokenizer).save_pretrained(tmp_path)  # max_position_embeddings=128
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert not reloaded.model_max_length < 10**9  # the tokenizer itself knows no limit
    collator = StructureCollator(reloaded)
    assert collator.max_length == 128
    fits = _chain(_words_of_tokens(reloaded, 126), "fits")  # 126 words + [CLS] + [SEP] = 128 tokens
    assert collator([fits])["input_ids"].shape == (1, 128)
    with pytest.raises(ValueError, match=r"sentence 'too-long' has 129 tokens, more than the model's 128"):
        collator([fits, _chain(_words_of_tokens(reloaded, 127), "too-long")])


def test_position_limit_of_a_given_model_applies_without_max_length(tokenizer):
    from tests.hf.conftest import tiny_model

    assert StructureCollator(tokenizer).max_length is None  # an in-memory trained tokenizer: no limit known
    model = tiny_model("roberta", tokenizer)  # 128 positions, less RoBERTa's offset (pad_token_id + 1)
    collator = StructureCollator(tokenizer, model=model)
    limit = 128 - tokenizer.pad_token_id - 1
    assert collator.max_length == limit
    with pytest.raises(ValueError, match=rf"sentence 'long' has {limit + 1} tokens, more than the model's {limit}"):
        collator([_chain(_words_of_tokens(tokenizer, limit - 1), "long")])
    assert StructureCollator(tokenizer, model=model, max_length=300).max_length == 300  # an explicit one wins


def test_a_saved_attached_roberta_keeps_its_position_offset():
    from structattn.hf.families import position_limit

    saved = {"model_type": "structattn_roberta", "max_position_embeddings": 514, "pad_token_id": 1}
    assert position_limit(saved) == position_limit({**saved, "model_type": "roberta"}) == 512
