"""The bundled UD Czech PUD treebank, read by read_conllu and checked against the raw file.

Oracles: the ``conllu`` package parsing the raw text on its own (empty nodes kept) and networkx.
"""

from __future__ import annotations

from functools import lru_cache

import conllu
import networkx as nx
import pytest

from structattn.structures import bundled_treebank, load_bundled, read_conllu, write_conllu


@lru_cache(maxsize=1)
def raw() -> list[conllu.TokenList]:
    return conllu.parse(bundled_treebank().read_text(encoding="utf-8"))


def is_empty_node(token) -> bool:
    return isinstance(token["id"], tuple) and token["id"][1] == "."


def test_counts_match_the_raw_file():
    text = bundled_treebank().read_text(encoding="utf-8")
    lines = text.split("\n")
    word_lines = sum(1 for line in lines if line.split("\t")[0].isdigit())
    range_lines = sum(1 for line in lines if "-" in line.split("\t")[0] and not line.startswith("#"))
    sentences = load_bundled()
    assert len(sentences) == sum(1 for line in lines if line.startswith("# sent_id")) == 1000
    assert sum(len(s) for s in sentences) == word_lines == 18609
    assert sum(len(s.multiword) for s in sentences) == range_lines == 45
    assert len({s.doc_id for s in sentences}) == sum(1 for line in lines if line.startswith("# newdoc")) == 397


def test_limit_and_fresh_copies():
    first = load_bundled(limit=3)
    assert [s.id for s in first] == [s.id for s in load_bundled()[:3]]
    with pytest.raises(AttributeError):
        first[0].words.append("changed")  # the words are a tuple: shared between copies, never changed
    first[0].meta["text"] = "changed"
    first[0].words = [*first[0].words[:-1], "changed"]  # a new tuple on this copy only
    assert load_bundled(limit=1)[0].words[-1] != "changed" and load_bundled(limit=1)[0].meta["text"] != "changed"
    assert load_bundled(limit=0) == []
    with pytest.raises(ValueError, match="limit"):
        load_bundled(limit=-1)


def test_every_sentence_is_a_tree_with_enhanced_edges():
    for s, tokens in zip(load_bundled(), raw()):
        tree = nx.DiGraph()
        tree.add_nodes_from(range(len(s)))
        tree.add_edges_from((h, d) for d, h in enumerate(s.heads) if h >= 0)
        assert nx.is_arborescence(tree), s.id
        assert s.heads.count(-1) == 1
        assert s.edges, s.id
        assert {e.dependent for e in s.edges} == set(range(len(s))), f"{s.id}: a word without enhanced head"
        assert s.meta["text_en"] and s.meta["text"] == tokens.metadata["text"]


def test_multiword_tokens_match_their_lines():
    for s, tokens in zip(load_bundled(), raw()):
        ranges = [(t["id"][0] - 1, t["id"][2] - 1, t["form"]) for t in tokens if isinstance(t["id"], tuple)
                  and t["id"][1] == "-"]
        assert list(s.multiword) == ranges


def test_sentences_without_empty_nodes_keep_every_edge():
    for s, tokens in zip(load_bundled(), raw()):
        if any(is_empty_node(t) for t in tokens):
            continue
        expected = {(h - 1, t["id"] - 1, label) for t in tokens if isinstance(t["id"], int) for label, h in t["deps"]}
        assert {(e.head, e.dependent, e.label) for e in s.edges} == expected, s.id


def full_graph(tokens) -> nx.DiGraph:
    """The enhanced graph with empty nodes kept; nodes are the file's ids (0 = root, (8, '.', 1) = empty)."""
    graph = nx.DiGraph()
    for t in tokens:
        if isinstance(t["id"], int) or is_empty_node(t):
            for label, h in t["deps"]:
                graph.add_edge(h, t["id"], label=label)
    return graph


def stand_in(tokens, empty) -> int:
    """The file id of the word replacing a root-only empty node: the basic root if it depends on the empty
    node, else its first word dependent."""
    dependents = [t["id"] for t in tokens if isinstance(t["id"], int) and any(h == empty for _, h in t["deps"])]
    root = next(t["id"] for t in tokens if isinstance(t["id"], int) and t["head"] == 0)
    return root if root in dependents else dependents[0]


def collapsed_edges(tokens, empty, graph) -> set[tuple[int, int, str]]:
    """What one empty node turns into, as 0-based ``(head, dependent, label)``."""
    heads = [h for h, _ in graph.in_edges(empty)]
    if heads == [0]:  # root-only: a word stands in for it
        s = stand_in(tokens, empty)
        return {(-1 if d == s else s - 1, d - 1, data["label"]) for _, d, data in graph.out_edges(empty, data=True)}
    return {(h - 1, d - 1, data["label"]) for _, d, data in graph.out_edges(empty, data=True) for h in heads if h != d}


def test_empty_nodes_are_collapsed_onto_their_heads():
    """For each of the 13 empty nodes: its dependents hang off each of its heads with their own label (off
    the stand-in word when the root is its only head)."""
    seen = root_only = 0
    for s, tokens in zip(load_bundled(), raw()):
        empties = [t["id"] for t in tokens if is_empty_node(t)]
        if not empties:
            continue
        seen += len(empties)
        graph = full_graph(tokens)
        got = {(e.head, e.dependent, e.label) for e in s.edges}
        assert not any(isinstance(h, tuple) for h, _ in graph.in_edges(0)), "root is never a dependent"
        allowed = {(h - 1, d - 1, data["label"]) for h, d, data in graph.edges(data=True) if isinstance(d, int)
                   and isinstance(h, int)}
        for empty in empties:
            heads = [h for h, _ in graph.in_edges(empty)]
            assert all(isinstance(h, int) for h in heads), "no empty node heads another one in this treebank"
            root_only += heads == [0]
            expected = collapsed_edges(tokens, empty, graph)
            assert expected <= got, (s.id, empty, expected - got)
            allowed |= expected
        assert got == allowed, s.id  # nothing else was added
    assert seen == 13 and root_only == 2  # n01092014 and n05004025


def test_paths_through_empty_nodes_get_one_hop_shorter():
    """head -> empty -> dependent (2 hops) becomes head -> dependent (1 hop); no two words get farther apart."""
    for s, tokens in zip(load_bundled(), raw()):
        empties = [t["id"] for t in tokens if is_empty_node(t)]
        if not empties:
            continue
        directed = full_graph(tokens)
        before = directed.to_undirected()
        after = nx.Graph([(e.head + 1, e.dependent + 1) for e in s.edges])  # back to file ids, 0 = root
        for empty in empties:
            heads = [h for h, _ in directed.in_edges(empty)]
            hubs = [stand_in(tokens, empty)] if heads == [0] else heads
            for h in hubs:
                for _, d in directed.out_edges(empty):
                    if h != d and not before.has_edge(h, d):
                        assert nx.shortest_path_length(before, h, d) == 2
                        assert nx.shortest_path_length(after, h, d) == 1, (s.id, empty, h, d)
        far_before = dict(nx.all_pairs_shortest_path_length(before))
        for a, row in nx.all_pairs_shortest_path_length(after):
            for b, hops in row.items():
                assert hops <= far_before[a][b], (s.id, a, b)


def test_round_trip_of_the_whole_treebank():
    """Identical for the collapsed form: empty nodes are removed on the first read and not written back."""
    sentences = load_bundled()
    text = write_conllu(sentences)
    assert read_conllu(text) == sentences
    ids = [line.split("\t")[0] for line in text.split("\n") if line and not line.startswith("#")]
    assert not any("." in i for i in ids)  # no empty node is written back
    # against the original file, parsed independently: same words, tags, trees and (without empty nodes) DEPS
    for written, original in zip(conllu.parse(text), raw()):
        keep = ("id", "form", "upos", "head", "deprel")
        assert [[t[k] for k in keep] for t in written] == [[t[k] for k in keep] for t in original if not is_empty_node(t)]
        if not any(is_empty_node(t) for t in original):
            assert [t["deps"] for t in written if isinstance(t["id"], int)] == \
                   [t["deps"] for t in original if isinstance(t["id"], int)]


# --- UD English PUD (load_bundled(treebank="en_pud")) -------------------------------------------------------


@lru_cache(maxsize=1)
def raw_english() -> list[conllu.TokenList]:
    return conllu.parse(bundled_treebank("en_pud").read_text(encoding="utf-8"))


def test_english_counts_ids_and_gold_heads_match_the_raw_file():
    english = load_bundled(treebank="en_pud")
    assert bundled_treebank("en_pud").name == "en_pud-ud-test.conllu"
    assert len(english) == len(raw_english()) == 1000
    assert sum(len(s) for s in english) == 21180
    assert sum(len(s.multiword) for s in english) == 129
    for s, tokens in zip(english, raw_english()):
        words = [t for t in tokens if isinstance(t["id"], int)]
        assert s.id == tokens.metadata["sent_id"] and s.meta["text"] == tokens.metadata["text"]
        assert list(s.words) == [t["form"] for t in words], s.id
        assert list(s.heads) == [t["head"] - 1 for t in words], s.id  # 1-based, 0 = root -> 0-based, -1 = root
        assert list(s.deprels) == [t["deprel"] for t in words], s.id


def test_english_sentences_are_trees_parallel_to_the_czech_ones():
    english = load_bundled(treebank="en_pud")
    assert [s.id for s in english] == [s.id for s in load_bundled()]  # PUD: the same sentences, same ids
    for s in english:
        tree = nx.DiGraph()
        tree.add_nodes_from(range(len(s)))
        tree.add_edges_from((h, d) for d, h in enumerate(s.heads) if h >= 0)
        assert nx.is_arborescence(tree), s.id


def test_default_stays_czech_and_names_are_checked():
    assert bundled_treebank() == bundled_treebank("cs_pud") and bundled_treebank().name == "cs_pud-gold.conllu"
    assert list(load_bundled(limit=1)[0].words[:2]) == ["„", "V"]
    assert list(load_bundled(limit=2, treebank="en_pud")[0].words[:2]) == ["“", "While"]
    english = load_bundled(limit=1, treebank="en_pud")
    english[0].meta["text"] = "changed"
    assert load_bundled(limit=1, treebank="en_pud")[0].meta["text"] != "changed"
    with pytest.raises(ValueError, match=r"unknown bundled treebank 'de_pud'.*cs_pud.*en_pud"):
        load_bundled(treebank="de_pud")
    with pytest.raises(TypeError, match=r"treebank='en_pud'"):
        load_bundled("en_pud")
