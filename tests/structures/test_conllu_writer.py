"""write_conllu: round trips through read_conllu, and what the writer refuses."""

from __future__ import annotations

from pathlib import Path

import conllu
import pytest

from structattn.structures import Mention, Sentence, read_conllu, read_conllu_documents, write_conllu

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("name", ["ud_small.conllu", "corefud_small.conllu"])
def test_round_trip_of_fixtures(name):
    sentences = read_conllu(FIXTURES / name)
    text = write_conllu(sentences)
    assert read_conllu(text) == sentences
    assert write_conllu(read_conllu(text)) == text  # the written form is a fixed point


def test_round_trip_keeps_documents_and_their_coreference():
    documents = read_conllu_documents(FIXTURES / "corefud_small.conllu")
    text = write_conllu([s for d in documents for s in d.sentences])
    again = read_conllu_documents(text)
    assert [(d.id, d.coref) for d in again] == [(d.id, d.coref) for d in documents]


def test_written_columns(tmp_path):
    s1 = read_conllu(FIXTURES / "ud_small.conllu")[0]
    path = tmp_path / "out.conllu"
    text = write_conllu([s1], path)
    assert path.read_text(encoding="utf-8") == text
    (parsed,) = conllu.parse(text)  # an independent parser reads it back
    assert parsed.metadata["sent_id"] == "s1" and parsed.metadata["newdoc id"] == "d1"
    assert parsed.metadata["text_en"] == "Let's go to the market."
    assert [t["id"] for t in parsed] == [1, (2, "-", 3), 2, 3, 4, 5]
    words = [t for t in parsed if isinstance(t["id"], int)]
    assert [t["head"] for t in words] == [0, 4, 4, 1, 1]
    assert [t["deps"] for t in words][3] == [("obl:a", 1)]


def test_python_sentences_with_coreference():
    s = Sentence(words="John saw his old dog".split(), heads=[1, -1, 4, 4, 1],
                 coref=[[(0, 1, 0), (2, 3, 2)], [(2, 5, 4)]], id="p1")
    text = write_conllu([s])
    assert "# global.Entity = eid-etype-head-other" in text
    (back,) = read_conllu(text)
    assert back.coref == s.coref and back.heads == s.heads
    assert back.meta == {"global.Entity": "eid-etype-head-other", "coref_ids": ["s0e0", "s0e1"]}


def test_nested_same_entity_mentions_round_trip():
    """Two mentions of one entity starting at the same word: the longer bracket must open first."""
    s = Sentence(words=list("abcde"), coref=[[Mention(0, 2, 1), Mention(0, 4, 3), Mention(1, 2, 1)]], id="n")
    (back,) = read_conllu(write_conllu([s]))
    assert back.coref == ((Mention(0, 4, 3), Mention(0, 2, 1), Mention(1, 2, 1)),)  # canonical order: (start, -end)


def test_writer_refuses_what_conllu_cannot_hold():
    with pytest.raises(ValueError, match=r"sentence 'w': token 1 \('b\\tc'\)"):
        write_conllu([Sentence(words=["a", "b\tc"], id="w")])
    crossing = Sentence(words=list("abcd"), coref=[[(0, 3), (1, 4)]], id="x")
    with pytest.raises(ValueError, match=r"sentence 'x': mentions \[0, 3\) and \[1, 4\) of entity 's0e0' cross"):
        write_conllu([crossing])
    bad_id = Sentence(words=["a"], coref=[[(0, 1)]], id="y", meta={"coref_ids": ["e-1"]})
    with pytest.raises(ValueError, match=r"sentence 'y': entity id 'e-1' cannot be written"):
        write_conllu([bad_id])
