"""Providers against networkx oracles and hand-written literal cases (the registry-wide contract is in
test_provider_contract.py, run through structattn.testing)."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest
import torch

from structattn.structures import Document, Sentence, get_provider
from tests.structures import oracles

SIZES = [1, 2, 3, 7, 16, 40]


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.int64).numpy()


@pytest.mark.parametrize("seed", range(6))
def test_dependency_matches_networkx_on_random_trees(seed: int) -> None:
    rng = random.Random(seed)
    sentences = [oracles.random_sentence(n, rng, f"s{n}") for n in SIZES]
    batch = get_provider("dependency").batch(sentences)
    for k, s in enumerate(sentences):
        want = oracles.distances_from_graph(oracles.dependency_graph(s), len(s))
        n = len(s)
        np.testing.assert_array_equal(_as_numpy(batch.distance[k, :n, :n]), want)
        assert (batch.distance[k, n:] == -1).all() and (batch.distance[k, :, n:] == -1).all()


@pytest.mark.parametrize("seed", range(6))
def test_semantic_matches_networkx_on_random_graphs(seed: int) -> None:
    rng = random.Random(100 + seed)
    sentences = [oracles.random_sentence(n, rng, f"s{n}") for n in SIZES]
    batch = get_provider("semantic").batch(sentences)
    for k, s in enumerate(sentences):
        want = oracles.distances_from_graph(oracles.semantic_graph(s), len(s))
        np.testing.assert_array_equal(_as_numpy(batch.distance[k, : len(s), : len(s)]), want)


@pytest.mark.parametrize("seed", range(6))
def test_coreference_matches_networkx(seed: int) -> None:
    rng = random.Random(200 + seed)
    sentences = [oracles.random_sentence(n, rng, f"s{n}") for n in SIZES]
    batch = get_provider("coreference").batch(sentences)
    for k, s in enumerate(sentences):
        want = oracles.distances_from_graph(oracles.coreference_graph(len(s), s.coref, s.heads), len(s))
        np.testing.assert_array_equal(_as_numpy(batch.distance[k, : len(s), : len(s)]), want)


@pytest.mark.parametrize("seed", range(4))
def test_union_on_documents_matches_networkx(seed: int) -> None:
    rng = random.Random(300 + seed)
    docs = [oracles.random_document(rng, f"d{k}") for k in range(4)]
    batch = get_provider("union", providers=["dependency", "coreference"]).batch(docs)
    for k, doc in enumerate(docs):
        heads = [h + off if h >= 0 else -1 for s, off in zip(doc.sentences, doc.offsets) for h in s.heads]
        graph = oracles.coreference_graph(len(doc), doc.coref, heads)
        for s, off in zip(doc.sentences, doc.offsets):
            graph.add_edges_from((i + off, h + off) for i, h in enumerate(s.heads) if h >= 0)
        n = len(doc)
        np.testing.assert_array_equal(_as_numpy(batch.distance[k, :n, :n]), oracles.distances_from_graph(graph, n))


def test_dependency_literal_case() -> None:
    # The cat sat on the mat: det(cat, the), nsubj(sat, cat), root sat, case(mat, on), det(mat, the), obl(sat, mat)
    s = Sentence(["The", "cat", "sat", "on", "the", "mat"], heads=[1, 2, -1, 5, 5, 2], id="lit")
    st = get_provider("dependency")(s)
    want = [
        [0, 1, 2, 4, 4, 3],
        [1, 0, 1, 3, 3, 2],
        [2, 1, 0, 2, 2, 1],
        [4, 3, 2, 0, 2, 1],
        [4, 3, 2, 2, 0, 1],
        [3, 2, 1, 1, 1, 0],
    ]
    assert st.distance.tolist() == want
    assert st.distance.dtype == torch.int16
    assert st.adjacency.tolist() == [[d in (0, 1) for d in row] for row in want]


def test_semantic_literal_case_with_reentrancy_and_disconnected_word() -> None:
    # "Mary wants to sleep ." : Mary is the subject of both verbs (reentrancy); "." has no semantic edge.
    s = Sentence(["Mary", "wants", "to", "sleep", "."], edges=[(1, 0), (3, 0), (1, 3), (3, 2), (-1, 1)], id="sem")
    st = get_provider("semantic")(s)
    assert st.distance.tolist() == [
        [0, 1, 2, 1, -1],
        [1, 0, 2, 1, -1],
        [2, 2, 0, 1, -1],
        [1, 1, 1, 0, -1],
        [-1, -1, -1, -1, 0],
    ]


def test_coreference_literal_document() -> None:
    # [John] saw [his dog] . || [He] smiled .   John, his and He corefer.
    first = Sentence(["John", "saw", "his", "dog", "."], heads=[1, -1, 3, 1, 1], id="a")
    second = Sentence(["He", "smiled", "."], heads=[1, -1, 1], id="b")
    doc = Document([first, second], coref=[[(0, 1), (2, 3), (5, 6)]], id="doc")
    d = get_provider("coreference")(doc).distance
    assert d[0, 5] == 1 and d[2, 5] == 1 and d[0, 2] == 1
    assert d[1, 0] == -1 and d[3, 6] == -1
    u = get_provider("union", providers=["dependency", "coreference"])(doc).distance
    assert u[3, 6] == 3 and u[3, 7] == 4  # dog -> his -> He -> smiled -> .
    assert get_provider("dependency")(doc).distance[3, 6] == -1  # a document is a forest of sentence trees


def test_window_compact_and_dense() -> None:
    s = Sentence([f"w{i}" for i in range(6)], id="w")
    st = get_provider("window", radius=2, dilation=2, global_tokens=[0])(s)
    assert st.distance is None and st.window_radius == 2 and st.is_global.tolist() == [True] + [False] * 5
    d = st.dense_distance()
    assert d[2].tolist() == [1, -1, 0, -1, 2, -1]
    assert d[0].tolist() == [0, 1, 1, 1, 1, 1]
    assert d[5].tolist() == [1, 4, -1, 2, -1, 0]  # offsets 2 and 4 = radius * dilation


def test_window_batch_keeps_compact_form_and_padding() -> None:
    sentences = [Sentence(["a"] * n, id=str(n)) for n in (3, 5)]
    batch = get_provider("window", radius=1, global_tokens=["last"]).batch(sentences)
    assert batch.distance is None and batch.is_global.tolist() == [[False, False, True, False, False], [False] * 4 + [True]]
    dense = batch.dense_distance()
    assert (dense[0, 3:] == -1).all() and (dense[0, :, 3:] == -1).all()
    assert dense[0, 0].tolist() == [0, 1, 1, -1, -1]


def test_unknown_provider_lists_known_names() -> None:
    with pytest.raises(ValueError, match="unknown structure provider 'syntax'.*dependency"):
        get_provider("syntax")


def test_missing_annotation_names_sentence() -> None:
    with pytest.raises(ValueError, match="'heads' annotation.*'bare'"):
        get_provider("dependency")(Sentence(["a", "b"], id="bare"))
    with pytest.raises(ValueError, match="'coref'.*'nocoref'"):
        get_provider("coreference")(Sentence(["a"], heads=[-1], id="nocoref"))


def test_empty_batch_rejected() -> None:
    with pytest.raises(ValueError, match="empty batch"):
        get_provider("dependency").batch([])


def test_union_rejects_window_and_empty() -> None:
    with pytest.raises(ValueError, match="only graph providers"):
        get_provider("union", providers=["dependency", "window"])
    with pytest.raises(ValueError, match="at least one"):
        get_provider("union", providers=[])


def test_custom_provider_from_networkx_in_a_few_lines() -> None:
    from structattn.structures import GraphProvider, register_provider
    from structattn.registry import Registry  # noqa: F401  (the registry is public)

    @register_provider("test_meta_graph")
    class MetaGraph(GraphProvider):
        def graph_edges(self, item):
            return list(item.meta["graph"].edges)

    try:
        graph = nx.cycle_graph(6)
        s = Sentence(["t"] * 6, id="g", meta={"graph": graph})
        d = get_provider("test_meta_graph")(s).distance
        np.testing.assert_array_equal(_as_numpy(d), oracles.distances_from_graph(graph, 6))
    finally:
        from structattn.structures.providers.base import PROVIDERS

        PROVIDERS._entries.pop("test_meta_graph")
