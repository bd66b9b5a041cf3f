"""User input that used to be coerced silently (a string split into letters, 1.7 -> 1) is rejected by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structattn.structures import Mention, SemanticEdge, Sentence, Structure, align_to_subwords, get_provider


def test_a_string_is_not_a_list_of_words():
    with pytest.raises(ValueError, match=r"sentence 's9': words is the string 'abcd'; pass a list"):
        Sentence("abcd", id="s9")
    with pytest.raises(ValueError, match=r"sentence 's9': word 1 is 3 \(int\)"):
        Sentence(["a", 3], id="s9")
    with pytest.raises(ValueError, match=r"sentence 's9': deprels is the string"):
        Sentence(["a", "b"], deprels="ab", id="s9")


@pytest.mark.parametrize("bad", [1.7, 1.0, True, "1", None])
def test_heads_must_be_integers(bad):
    with pytest.raises(ValueError, match=rf"sentence 's1': token 0 \('a'\) head is {bad!r}"):
        Sentence(["a", "b", "c"], heads=[bad, -1, 1], id="s1")


def test_integer_scalars_of_numpy_and_torch_are_heads():
    s = Sentence(["a", "b", "c"], heads=[np.int64(1), torch.tensor(-1), 1])
    assert s.heads == (1, -1, 1) and all(type(h) is int for h in s.heads)


@pytest.mark.parametrize("edge, culprit", [((1.5, 0), "head is 1.5"), ((1, False), "dependent is False")])
def test_edges_must_be_integers(edge, culprit):
    with pytest.raises(ValueError, match=rf"sentence 'e1': semantic edge {culprit}"):
        Sentence(["a", "b"], edges=[edge], id="e1")
    with pytest.raises(ValueError, match=culprit):
        SemanticEdge(*edge)


def test_mentions_must_be_integers():
    with pytest.raises(ValueError, match=r"sentence 'm1': mention end is 2.0"):
        Sentence(["a", "b"], coref=[[(0, 2.0)]], id="m1")
    with pytest.raises(ValueError, match=r"mention head is True"):
        Mention(0, 2, True)


@pytest.mark.parametrize("option, value", [("radius", 1.5), ("radius", 2.0), ("radius", True), ("dilation", 2.5),
                                           ("dilation", False)])
def test_window_sizes_must_be_integers(option, value):
    with pytest.raises(ValueError, match=rf"window: {option} is {value!r}"):
        get_provider("window", **{option: value})


@pytest.mark.parametrize("value", [0.0, True, "0", "first"])
def test_window_global_tokens_must_be_integers(value):
    with pytest.raises(ValueError, match=rf"window: global token 1 is {value!r}"):
        get_provider("window", global_tokens=[2, value])
    with pytest.raises(ValueError, match="global_tokens must be a sequence"):
        get_provider("window", global_tokens=3)


@pytest.mark.parametrize("position", [7, 8])
def test_window_global_token_outside_the_sentence_names_position_and_length(position):
    provider = get_provider("window", radius=1, global_tokens=[0, position])
    sentences = [Sentence([f"w{i}" for i in range(9)], id="long"), Sentence([f"w{i}" for i in range(7)], id="short")]
    with pytest.raises(ValueError, match=rf"global token {position} is outside sentence 'short', which has 7 tokens "
                                         r"\(valid: 0\.\.6"):
        provider.batch(sentences)


@pytest.mark.parametrize("position", [-1, -8])
def test_negative_global_token_is_refused(position):
    # Python-style indexing from the end would silently make -1 the last token
    with pytest.raises(ValueError, match=rf"global token 1 is {position}: negative positions are refused.*'last'"):
        get_provider("window", radius=1, global_tokens=[0, position])


def test_last_names_each_sentences_last_token():
    sentences = [Sentence([f"w{i}" for i in range(n)], id=f"s{n}") for n in (5, 3)]
    batch = get_provider("window", radius=1, global_tokens=["last"]).batch(sentences)
    assert batch.is_global.tolist() == [[False] * 4 + [True], [False, False, True, False, False]]


def test_structure_window_fields_must_be_integers():
    mask = torch.ones(4, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"Structure: window_radius is 1.5"):
        Structure(token_mask=mask, window_radius=1.5)
    with pytest.raises(ValueError, match=r"Structure: dilation is True"):
        Structure(token_mask=mask, window_radius=1, dilation=True)


def test_piece_distance_must_be_an_integer():
    structure = get_provider("dependency")(Sentence(["a", "b"], heads=[-1, 0]))
    with pytest.raises(ValueError, match=r"piece_distance is 0.5"):
        align_to_subwords(structure, [0, 0, 1], piece_distance=0.5)


def test_grammar_depth_is_not_a_boolean():
    from structattn.structures.generators.config import GrammarConfig

    with pytest.raises(ValueError, match="max_depth must be an integer >= 0, got True"):
        GrammarConfig(max_depth=True)
