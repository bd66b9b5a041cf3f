"""from_stanza: stanza Documents built offline with CoNLL.conll2doc (no models, no Pipeline) must give the
same Sentences as read_conllu on the same text."""

from __future__ import annotations

from pathlib import Path

import pytest

from structattn.structures import bundled_treebank, from_stanza, read_conllu

stanza_conll = pytest.importorskip("stanza.utils.conll", reason="stanza is not installed")
CoNLL = stanza_conll.CoNLL

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def stanza_doc(text: str, keep_empty: bool = True):
    return CoNLL.conll2doc(input_str=text, ignore_gapping=not keep_empty)


@pytest.mark.parametrize("name", ["ud_small.conllu", "corefud_small.conllu"])
def test_fixture_documents_equal_read_conllu(name):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    assert from_stanza(stanza_doc(text)) == read_conllu(text)


def test_bundled_sentences_with_empty_nodes_and_multiword_tokens():
    """The first 60 sentences plus every sentence with an empty node or a multi-word token."""
    blocks = bundled_treebank().read_text(encoding="utf-8").split("\n\n")
    chosen = [b for k, b in enumerate(blocks) if b.strip() and (k < 60 or "\n0." in b or ".1\t" in b or "-" in
              "".join(line.split("\t")[0] for line in b.split("\n") if not line.startswith("#")))]
    text = "\n\n".join(chosen) + "\n\n"
    expected = read_conllu(text)
    assert sum(len(s.multiword) for s in expected) == 45 and len(expected) > 100
    assert from_stanza(stanza_doc(text)) == expected


def test_single_sentence_keeps_its_document_context():
    text = (FIXTURES / "corefud_small.conllu").read_text(encoding="utf-8")
    doc = stanza_doc(text)
    second = from_stanza(doc.sentences[1])
    assert second == read_conllu(text)[1]
    assert second.doc_id == "doc1" and second.coref  # newdoc id and global.Entity come from sentence 1


def test_converted_values():
    s = from_stanza(stanza_doc((FIXTURES / "ud_small.conllu").read_text(encoding="utf-8")).sentences[0])
    assert s.words == ("Vamos", "a", "el", "mercado", ".") and s.heads == (-1, 3, 3, 0, 0)
    assert s.multiword == ((1, 2, "al"),) and s.id == "s1" and s.meta["text_en"] == "Let's go to the market."


def test_empty_nodes_dropped_by_stanza_are_a_clear_error():
    """conll2doc's default ignore_gapping=True drops empty nodes but keeps DEPS that point at them."""
    text = (FIXTURES / "ud_small.conllu").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=r"sentence 's2': token 3 \('and', ID 4\) names empty node 5\.1 in DEPS.*ignore_gapping=False"):
        from_stanza(stanza_doc(text, keep_empty=False))


def test_other_objects_are_rejected():
    with pytest.raises(TypeError, match="stanza Document or Sentence"):
        from_stanza("1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n")
