"""Structure <-> networkx / torch_geometric round trips."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data

from structattn.structures import get_provider
from structattn.structures.interop import from_edge_index, from_networkx, from_pyg, to_edge_index, to_networkx, to_pyg
from tests.structures import oracles


def test_networkx_round_trip_on_random_trees() -> None:
    rng = random.Random(3)
    for n in (1, 5, 23):
        st = get_provider("dependency")(oracles.random_sentence(n, rng, "x"))
        graph = to_networkx(st)
        assert nx.is_tree(graph) and graph.number_of_nodes() == n
        back = from_networkx(graph)
        assert torch.equal(back.distance, st.distance) and torch.equal(back.adjacency, st.adjacency)


def test_from_networkx_matches_all_pairs_shortest_paths_and_relabels() -> None:
    graph = nx.relabel_nodes(nx.gnp_random_graph(12, 0.2, seed=1), lambda v: f"n{v:02d}")
    st = from_networkx(graph)
    relabelled = nx.relabel_nodes(graph, {v: i for i, v in enumerate(sorted(graph.nodes))})
    np.testing.assert_array_equal(st.distance.long().numpy(), oracles.distances_from_graph(relabelled, 12))


def test_pyg_round_trip() -> None:
    st = get_provider("semantic")(oracles.random_sentence(9, random.Random(5), "p"))
    data = to_pyg(st)
    assert isinstance(data, Data) and data.num_nodes == 9
    assert torch.equal(data.distance, st.distance)
    back = from_pyg(data)
    assert torch.equal(back.distance, st.distance)
    assert torch.equal(to_edge_index(back), to_edge_index(st))


def test_directed_edge_index() -> None:
    st = from_edge_index(torch.tensor([[0, 1], [1, 2]]), 3, directed=True)
    assert st.distance.tolist() == [[0, 1, 2], [-1, 0, 1], [-1, -1, 0]]
    assert to_networkx(st).is_directed()
