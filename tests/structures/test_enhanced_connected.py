"""Collapsing empty nodes keeps connected enhanced graphs connected (regression: a root-only empty node).

Oracle: the ``conllu`` package parses the raw text on its own (empty nodes kept) and networkx decides which
real words are connected in that graph (the artificial root 0 left out: root edges add no edge).
"""

from __future__ import annotations

from pathlib import Path

import conllu
import networkx as nx
import pytest

from structattn.structures import bundled_treebank, get_provider, read_conllu

UD = Path(__file__).resolve().parent.parent / "fixtures" / "ud_small.conllu"


def raw_graph(tokens: conllu.TokenList) -> tuple[nx.Graph, list[int]]:
    """Undirected enhanced graph over words and empty nodes (file ids), without the root; and the word ids."""
    graph = nx.Graph()
    words = [t["id"] for t in tokens if isinstance(t["id"], int)]
    graph.add_nodes_from(words)
    for t in tokens:
        if isinstance(t["id"], int) or t["id"][1] == ".":
            graph.add_edges_from((h, t["id"]) for _, h in t["deps"] if h != 0)
    return graph, words


def unreachable_word_pairs(path: Path, sentence_id: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``(pairs the raw graph connects but the structure calls unreachable, connected pairs in raw graph)``."""
    tokens = next(t for t in conllu.parse(path.read_text(encoding="utf-8")) if t.metadata["sent_id"] == sentence_id)
    sentence = next(s for s in read_conllu(path) if s.id == sentence_id)
    distance = get_provider("semantic")(sentence).distance
    graph, words = raw_graph(tokens)
    connected = [(a, b) for a in words for b in words if nx.has_path(graph, a, b)]
    return [(a, b) for a, b in connected if distance[a - 1, b - 1] < 0], connected


@pytest.mark.parametrize("path, sentence_id", [(bundled_treebank(), "n01092014"), (bundled_treebank(), "n05004025"),
                                               (UD, "s3")])
def test_root_only_empty_node_keeps_words_connected(path, sentence_id):
    broken, connected = unreachable_word_pairs(path, sentence_id)
    assert len(connected) > 1  # the raw graph does connect the words
    assert broken == [], f"{sentence_id}: word pairs cut apart by collapsing: {broken}"


def test_every_bundled_sentence_with_empty_nodes_stays_connected():
    path = bundled_treebank()
    ids = [t.metadata["sent_id"] for t in conllu.parse(path.read_text(encoding="utf-8"))
           if any(isinstance(x["id"], tuple) and x["id"][1] == "." for x in t)]
    assert len(ids) >= 10
    for sentence_id in ids:
        broken, _ = unreachable_word_pairs(path, sentence_id)
        assert broken == [], (sentence_id, broken)


def test_stand_in_distances_literal():
    """s3 "And so on .": "on" stands in for the elided 0.1, so every other word is 1 hop from it, 2 from each other."""
    s3 = next(s for s in read_conllu(UD) if s.id == "s3")
    distance = get_provider("semantic")(s3).distance.tolist()
    assert distance == [[0, 2, 1, 2], [2, 0, 1, 2], [1, 1, 0, 1], [2, 2, 1, 0]]


def test_stand_in_is_first_dependent_without_a_basic_root_among_them():
    text = "\n".join([
        "# sent_id = x1",
        "1\ta\t_\tX\t_\t_\t0\troot\t0:root\t_",
        "1.1\t_\t_\tX\t_\t_\t_\t_\t0:root\t_",
        "2\tb\t_\tX\t_\t_\t1\tdep\t1.1:obj\t_",
        "3\tc\t_\tX\t_\t_\t1\tdep\t1.1:nsubj|1:dep\t_",
        "", ""])
    edges = {(e.head, e.dependent, e.label) for e in read_conllu(text)[0].edges}
    assert edges == {(-1, 0, "root"), (-1, 1, "obj"), (1, 2, "nsubj"), (0, 2, "dep")}
