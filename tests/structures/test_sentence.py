"""Plain Python input: the Sentence constructor, its conversions and its validation messages."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import pytest
import torch

from structattn.structures import Document, Mention, SemanticEdge, Sentence, get_provider


def test_words_and_heads():
    s = Sentence(words=["the", "cat", "sat"], heads=(1, 2, -1), deprels=["det", "nsubj", "root"], id="p1")
    assert s.heads == (1, 2, -1) and isinstance(s.heads, tuple)
    assert len(s) == 3 and s.has("heads") and not s.has("edges") and not s.has("coref")
    # the heads form the tree networkx sees: an arborescence rooted at the -1 token
    tree = nx.DiGraph([(h, d) for d, h in enumerate(s.heads) if h >= 0])
    assert nx.is_arborescence(tree) and [n for n in tree if tree.in_degree(n) == 0] == [2]


def test_words_and_edges_from_tuples():
    s = Sentence(words=["dogs", "bark", "and", "howl"], edges=[(1, 0, "ARG1"), (3, 0), (-1, 2, "top")])
    assert s.edges == (SemanticEdge(1, 0, "ARG1"), SemanticEdge(3, 0, "_"), SemanticEdge(-1, 2, "top"))
    assert s.heads is None  # a graph with reentrancy (word 0 has two heads) needs no tree


def test_words_and_coreference_spans():
    s = Sentence(words="John saw his dog".split(), coref=[[(0, 1), (2, 3, 2)], [Mention(2, 4, 3)]])
    assert s.coref == ((Mention(0, 1, None), Mention(2, 3, 2)), (Mention(2, 4, 3),))


def test_document_concatenates_sentences():
    a, b = Sentence(["a", "b"], heads=[-1, 0]), Sentence(["c"], heads=[-1])
    doc = Document([a, b], coref=[[(0, 1), (2, 3)]], id="d")
    assert doc.words == ["a", "b", "c"] and doc.offsets == [0, 2] and len(doc) == 3


BAD = {
    "cycle": (dict(words=["a", "b", "c"], heads=[1, 0, -1]), ["cycle", "token 0 ('a')"]),
    "two roots": (dict(words=["a", "b", "c"], heads=[-1, 0, -1]), ["2 roots", "tokens [0, 2]"]),
    "no root": (dict(words=["a", "b"], heads=[1, 0]), ["no root"]),
    "head out of range": (dict(words=["a", "b"], heads=[-1, 5]), ["token 1 ('b')", "head 5", "2 tokens"]),
    "own head": (dict(words=["a", "b"], heads=[-1, 1]), ["token 1 ('b')", "its own head"]),
    "empty sentence": (dict(words=[]), ["empty sentence"]),
    "coref span outside": (dict(words=["a", "b"], coref=[[(0, 1)], [(1, 3)]]), ["cluster 1", "[1, 3)", "2 tokens"]),
    "coref head outside span": (dict(words=["a", "b"], coref=[[(0, 1, 1)]]), ["mention head 1", "[0, 1)"]),
    "heads length": (dict(words=["a", "b"], heads=[-1]), ["1 heads for 2 words"]),
    "deprels length": (dict(words=["a", "b"], heads=[-1, 0], deprels=["root"]), ["1 deprels for 2 words"]),
    "upos length": (dict(words=["a"], upos=["X", "Y"]), ["2 upos for 1 words"]),
    "edge head out of range": (dict(words=["a", "b"], edges=[(7, 1, "x")]), ["token 1", "head 7"]),
    "edge dependent out of range": (dict(words=["a", "b"], edges=[(0, 5, "x")]), ["dependent 5"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_names_sentence_and_token(case):
    kwargs, expected = BAD[case]
    with pytest.raises(ValueError) as info:
        Sentence(**kwargs, id="bad-1")
    message = str(info.value)
    assert "sentence 'bad-1'" in message
    for part in expected:
        assert part in message, f"{part!r} missing from {message!r}"


def test_sentence_without_id_says_so():
    with pytest.raises(ValueError, match=r"sentence \(no id\): token 1 \('b'\) has head 9"):
        Sentence(words=["a", "b"], heads=[-1, 9])


def test_a_built_sentence_cannot_change_length_or_annotation_in_place():
    s = Sentence(words=["a", "b", "c"], heads=[-1, 0, 1], deprels=["root", "x", "y"], upos=["X"] * 3,
                 edges=[(0, 1)], coref=[[(0, 1)]], multiword=[[0, 1, "ab"]], id="m1")
    provider = get_provider("dependency")
    before = provider(s)
    with pytest.raises(AttributeError):
        s.words.append("d")  # used to succeed: len(s) became 4 while the heads, and the structures, kept 3
    for name in ("heads", "deprels", "upos", "edges", "coref", "multiword"):
        with pytest.raises(TypeError):
            getattr(s, name)[0] = getattr(s, name)[0]
    with pytest.raises(TypeError):
        s.coref[0][0] = Mention(1, 2)
    assert len(s) == 3 and s.words == ("a", "b", "c") and s.multiword == ((0, 1, "ab"),)
    assert torch.equal(provider(s).distance, before.distance)


def test_assigning_a_whole_field_validates_it_against_the_sentence():
    s = Sentence(words=["a", "b", "c"], heads=[-1, 0, 1], id="m2")
    with pytest.raises(ValueError, match=r"sentence 'm2': 3 heads for 2 words"):
        s.words = ["a", "b"]
    with pytest.raises(ValueError, match=r"sentence 'm2': .*token 2 \('c'\) has head 7"):
        s.heads = [-1, 0, 7]
    assert s.words == ("a", "b", "c") and s.heads == (-1, 0, 1)  # a refused assignment changes nothing
    s.heads = [2, 2, -1]
    s.edges = None
    assert s.heads == (2, 2, -1) and isinstance(s.heads, tuple) and s.edges is None
    assert replace(s, heads=[-1, 0, 0]).heads == (-1, 0, 0) and s.heads == (2, 2, -1)
