"""stanza annotator: model checks before any network access, conversion of stanza Documents (built offline
with ``CoNLL.conll2doc``), and the real pipeline where its models are installed."""

from __future__ import annotations

import json

import pytest

from structattn.structures import read_conllu
from structattn.structures.annotators import StanzaAnnotator
from structattn.structures.cache import AnnotationCache

stanza = pytest.importorskip("stanza")
from stanza.utils.conll import CoNLL  # noqa: E402

DOC_A = """# text = The cat sat.
1	The	the	DET	DT	_	2	det	_	_
2	cat	cat	NOUN	NN	_	3	nsubj	_	_
3	sat	sit	VERB	VBD	_	0	root	_	_
4	.	.	PUNCT	.	_	3	punct	_	_

# text = It purred.
1	It	it	PRON	PRP	_	2	nsubj	_	_
2	purred	purr	VERB	VBD	_	0	root	_	_
3	.	.	PUNCT	.	_	2	punct	_	_

"""
DOC_B = """# text = I'm off.
1-2	I'm	_	_	_	_	_	_	_	_
1	I	I	PRON	PRP	_	3	nsubj	_	_
2	'm	be	AUX	VBP	_	3	cop	_	_
3	off	off	ADV	RB	_	0	root	_	_
4	.	.	PUNCT	.	_	3	punct	_	_

"""
RAW = {"The cat sat. It purred.": DOC_A, "I'm off.": DOC_B}


class FakePipeline:
    """Stands in for stanza.Pipeline: returns Documents read from CoNLL-U, counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def bulk_process(self, texts):
        self.calls += 1
        return [CoNLL.conll2doc(input_str=RAW[t]) for t in texts]


def offline_annotator(**kwargs) -> StanzaAnnotator:
    annotator = StanzaAnnotator(**kwargs)
    annotator._pipeline = FakePipeline()
    annotator._options = {"fake": True}  # no model files to fingerprint
    return annotator


def test_conversion_of_stanza_documents():
    out = offline_annotator().annotate(list(RAW))
    assert [s.id for s in out] == ["0-0", "0-1", "1-0"]
    assert out[0].words == ("The", "cat", "sat", ".") and out[0].heads == (1, 2, -1, 2)
    assert out[0].deprels == ("det", "nsubj", "root", "punct") and out[0].upos == ("DET", "NOUN", "VERB", "PUNCT")
    assert out[1].heads == (1, -1, 1) and out[1].meta["text"] == "It purred."
    assert out[2].words == ("I", "'m", "off", ".") and out[2].multiword == ((0, 1, "I'm"),)
    assert all(s.label_scheme == "UD" for s in out)


def test_conversion_equals_the_conllu_reader():
    out = offline_annotator().parse(["The cat sat. It purred."])[0]
    expected = read_conllu(DOC_A)
    assert [(s.words, s.heads, s.deprels, s.upos) for s in out] == [(s.words, s.heads, s.deprels, s.upos) for s in expected]


def test_documents_and_cache(tmp_path):
    annotator = offline_annotator()
    docs = annotator.annotate_documents(list(RAW), cache=AnnotationCache(tmp_path))
    assert [len(d.sentences) for d in docs] == [2, 1] and docs[1].sentences[0].id == "1-0"
    again = annotator.annotate_documents(list(RAW), cache=AnnotationCache(tmp_path))
    assert annotator._pipeline.calls == 1 and again == docs


def test_pretokenized_words_must_match_the_input():
    annotator = offline_annotator(pretokenized=True)
    RAW["I 'm off ."] = DOC_B
    RAW["I am off ."] = DOC_B
    try:
        assert annotator.annotate(["I 'm off ."])[0].words == ("I", "'m", "off", ".")
        with pytest.raises(ValueError, match=r"token 1 is \"'m\" for the parser but 'am' for the model"):
            annotator.annotate(["I am off ."])
    finally:
        del RAW["I 'm off ."], RAW["I am off ."]


@pytest.fixture
def no_network(monkeypatch):
    """Any download attempt or Pipeline construction fails the test."""
    import stanza.resources.common as common

    def refuse(*args, **kwargs):
        raise AssertionError("stanza tried to download or build a pipeline")

    monkeypatch.setattr(common, "request_file", refuse)
    monkeypatch.setattr(common, "download_resources_json", refuse)
    monkeypatch.setattr(stanza, "Pipeline", refuse)


def test_missing_resources_json_names_the_download_command(tmp_path, no_network):
    annotator = StanzaAnnotator(model_dir=tmp_path)
    expected = (f"python -c \"import stanza; stanza.download('en', model_dir='{tmp_path}', "
                "processors='tokenize,pos,lemma,depparse')\"")
    assert annotator.download_command() == expected
    with pytest.raises(ValueError) as info:
        annotator.annotate(["A text."])
    assert f"there is no {tmp_path / 'resources.json'}" in str(info.value) and expected in str(info.value)


RESOURCES = {"en": {
    "lang_name": "English",
    "tokenize": {"combined": {}}, "mwt": {"combined": {}}, "lemma": {"combined_nocharlm": {}},
    "pos": {"combined_charlm": {"dependencies": [{"model": "pretrain", "package": "conll17"},
                                                 {"model": "forward_charlm", "package": "1billion"}]}},
    "depparse": {"combined_charlm": {"dependencies": [{"model": "pretrain", "package": "conll17"}]}},
    "pretrain": {"conll17": {}}, "forward_charlm": {"1billion": {}},
    "packages": {"default": {"tokenize": "combined", "mwt": "combined", "pos": "combined_charlm",
                             "lemma": "combined_nocharlm", "depparse": "combined_charlm"}},
}}
EXPECTED = ["depparse/combined_charlm.pt", "forward_charlm/1billion.pt", "lemma/combined_nocharlm.pt",
            "mwt/combined.pt", "pos/combined_charlm.pt", "pretrain/conll17.pt", "tokenize/combined.pt"]


def test_missing_model_files_listed_before_any_download(tmp_path, no_network):
    (tmp_path / "resources.json").write_text(json.dumps(RESOURCES))
    annotator = StanzaAnnotator(model_dir=tmp_path)
    assert annotator.model_files() == [tmp_path / "en" / f for f in EXPECTED]
    present = EXPECTED[:3]
    for f in present:
        (tmp_path / "en" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "en" / f).write_bytes(b"")
    with pytest.raises(ValueError, match="download them once with: python -c") as info:
        annotator.annotate(["A text."])
    listed = str(info.value).split("missing model file(s): ")[1].split(")")[0].split(", ")
    assert listed == [str(tmp_path / "en" / f) for f in EXPECTED[3:]]


def test_pretokenized_needs_no_mwt_model(tmp_path):
    (tmp_path / "resources.json").write_text(json.dumps(RESOURCES))
    files = StanzaAnnotator(model_dir=tmp_path, pretokenized=True).model_files()
    assert [str(f.relative_to(tmp_path / "en")) for f in files] == [f for f in EXPECTED if not f.startswith("mwt")]


def test_processors_without_depparse_rejected():
    with pytest.raises(ValueError, match="lack 'depparse'"):
        StanzaAnnotator(processors="tokenize,pos")


def test_real_pipeline_where_models_exist():
    annotator = StanzaAnnotator()
    try:
        annotator.check_models()
    except ValueError as missing:
        pytest.skip(f"stanza English models are not installed here, so the real pipeline is not run: {missing}")
    out = annotator.annotate(["The cat sat on the mat. It purred."])
    assert [s.id for s in out] == ["0-0", "0-1"]
    assert out[0].words[:3] == ["The", "cat", "sat"] and out[0].heads.count(-1) == 1
