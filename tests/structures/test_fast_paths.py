"""The per-sentence fast path (``provider(s)``), the row-wise bitset path and the buffer ``collate`` agree
with networkx and with the batched engine (regression tests for the speed work of issue 6)."""

from __future__ import annotations

import random

import networkx as nx
import pytest
import torch
import torch.nn.functional as F

from structattn.structures import Document, Sentence, Structure, collate, get_provider
from structattn.structures import distances
from structattn.structures.providers.dependency import DependencyProvider
from tests.structures.oracles import distances_from_graph, random_heads


def graph_oracle(n: int, edges: list[tuple[int, int]]) -> list[list[int]]:
    """networkx hops over the undirected graph of ``edges``, -1 between components."""
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges)
    return distances_from_graph(graph, n).tolist()


def oracle(heads: list[int]) -> list[list[int]]:
    """networkx hops over the undirected forest, -1 across trees (float64-free, no shared code)."""
    return graph_oracle(len(heads), [(i, h) for i, h in enumerate(heads) if h >= 0])


@pytest.mark.parametrize("n", [1, 2, 7, 33, 64, 65, 90])
def test_single_sentence_equals_networkx_and_the_batch(n):
    rng = random.Random(n)
    sentence = Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, rng), id=f"r{n}")
    provider = get_provider("dependency")
    one = provider(sentence)
    assert one.distance.tolist() == oracle(sentence.heads)
    batch = provider.batch([sentence, Sentence(["a", "b", "c"], heads=[-1, 0, 1])])
    assert one.distance.dtype == batch.distance.dtype == torch.int16
    assert torch.equal(one.distance, batch.distance[0, :n, :n])
    assert torch.equal(one.adjacency, batch.adjacency[0, :n, :n])
    assert torch.equal(one.token_mask, batch.token_mask[0, :n])
    assert one.ids == [f"r{n}"] and one.source == "dependency"
    expected_adjacency = [[i == j or sentence.heads[i] == j or sentence.heads[j] == i for j in range(n)] for i in range(n)]
    assert one.adjacency.tolist() == expected_adjacency


def test_document_forest_single_equals_networkx():
    rng = random.Random(3)
    sentences = [Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, rng), id=f"s{k}")
                 for k, n in enumerate([5, 2, 7])]
    doc = Document(sentences, id="d")
    forest = [h + off if h >= 0 else -1 for s, off in zip(sentences, doc.offsets) for h in s.heads]
    one = get_provider("dependency")(doc)
    assert one.distance.tolist() == oracle(forest)
    assert torch.equal(one.distance, get_provider("dependency").batch([doc]).distance[0])


def test_heads_forced_into_a_cycle_still_raise():
    sentence = Sentence(["a", "b", "c"], heads=[-1, 0, 1], id="c1")
    with pytest.raises(TypeError):
        sentence.heads[0] = 1  # a tuple: no change in place after validation
    with pytest.raises(ValueError, match="cycle|root"):
        sentence.heads = [1, 0, 1]  # assigning the whole field validates it again
    object.__setattr__(sentence, "heads", (1, 0, 1))  # forced past validation: the provider still checks
    with pytest.raises(ValueError, match="cycle|root"):
        get_provider("dependency")(sentence)


def test_subclass_overriding_compute_is_not_bypassed():
    class Capped(DependencyProvider):
        name = "test_capped_fast"

        def compute(self, items):
            out = super().compute(items)
            out.distance = out.distance.clamp(max=1)
            return out

    sentence = Sentence(list("abcd"), heads=[-1, 0, 1, 2])
    assert int(Capped()(sentence).distance.max()) == 1


@pytest.mark.parametrize("by_row", [True, False])
def test_bitset_rows_and_vectorised_paths_agree_with_networkx(by_row, monkeypatch):
    monkeypatch.setattr(distances, "_NS_PER_PADDED_ENTRY", 10**6 if by_row else 0)
    rng = random.Random(11)
    lengths = [3, 40, 1, 17, 9]
    forests = []
    for n in lengths:
        heads = random_heads(n, rng)
        if n > 5:  # cut two edges: a forest of three trees
            for cut in rng.sample([i for i, h in enumerate(heads) if h >= 0], 2):
                heads[cut] = -1
        forests.append(heads)
    n_max = max(lengths)
    heads = torch.full((len(lengths), n_max), 7, dtype=torch.long)  # garbage on padding
    mask = torch.zeros(len(lengths), n_max, dtype=torch.bool)
    for k, h in enumerate(forests):
        heads[k, :len(h)] = torch.tensor(h)
        mask[k, :len(h)] = True
    out = distances.tree_distances(heads, mask)
    for k, h in enumerate(forests):
        m = len(h)
        assert out[k, :m, :m].tolist() == oracle(h)
        assert bool((out[k, m:] == -1).all()) and bool((out[k, :, m:] == -1).all())


def naive_collate(structures: list[Structure]) -> dict[str, torch.Tensor]:
    n = max(s.num_tokens for s in structures)
    pad = lambda t, v: F.pad(t, (0, n - t.shape[-1], 0, n - t.shape[-1]), value=v)  # noqa: E731
    return {"distance": torch.stack([pad(s.distance.long(), -1) for s in structures]),
            "adjacency": torch.stack([pad(s.adjacency, False) for s in structures]),
            "token_mask": torch.stack([F.pad(s.token_mask, (0, n - s.num_tokens), value=False) for s in structures])}


def test_buffer_collate_equals_padding_one_by_one():
    rng = random.Random(5)
    provider = get_provider("dependency")
    structures = [provider(Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, rng), id=f"s{n}"))
                  for n in (7, 2, 5, 3)]
    structures[1].token_mask = torch.tensor([True, False])  # a structure may carry its own padding
    out, expected = collate(structures), naive_collate(structures)
    assert out.distance.dtype == torch.int16 and torch.equal(out.distance.long(), expected["distance"])
    assert torch.equal(out.adjacency, expected["adjacency"]) and torch.equal(out.token_mask, expected["token_mask"])
    assert out.ids == ["s7", "s2", "s5", "s3"]


@pytest.mark.parametrize("n", [1, 4, 23, 96, 97])
def test_graph_single_equals_networkx_and_the_batch(n):
    rng = random.Random(100 + n)
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(n)]
    edges = [(i, j) for i, j in edges if i != j]  # sparse: several components
    sentence = Sentence([f"w{i}" for i in range(n)], edges=edges, id=f"g{n}")
    provider = get_provider("semantic")
    one = provider(sentence)
    assert one.distance.tolist() == graph_oracle(n, [(j, i) for i, j in edges])
    batch = provider.batch([sentence, Sentence(["a", "b"], edges=[(0, 1)])])
    for name in ("distance", "adjacency"):
        assert getattr(one, name).dtype == getattr(batch, name).dtype
        assert torch.equal(getattr(one, name), getattr(batch, name)[0, :n, :n]), name
    assert torch.equal(one.token_mask, batch.token_mask[0, :n]) and one.source == "semantic"


def test_graph_single_on_the_bundled_enhanced_graphs_and_union():
    from structattn.structures import load_bundled

    sentences = load_bundled(40)
    for name in ("semantic", "union"):
        provider = get_provider(name, **({"providers": ["dependency", "semantic"]} if name == "union" else {}))
        batch = provider.batch(sentences)
        for k, s in enumerate(sentences):
            one, n = provider(s), len(s)
            assert torch.equal(one.distance, batch.distance[k, :n, :n]), (name, s.id)
            assert torch.equal(one.adjacency, batch.adjacency[k, :n, :n]), (name, s.id)


def test_graph_single_falls_back_for_edges_outside_the_item():
    from structattn.structures import GraphProvider

    class Broken(GraphProvider):
        name = "test_broken_edges"

        def graph_edges(self, item):
            return [(0, len(item))]

    with pytest.raises(ValueError):
        Broken()(Sentence(["a", "b"]))
