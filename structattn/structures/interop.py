"""Conversions between :class:`Structure` and networkx / torch_geometric graphs."""

from __future__ import annotations

import networkx as nx
import torch
from torch_geometric.data import Data
from torch_geometric.utils import dense_to_sparse, remove_self_loops

from structattn.structures.distances import graph_distances
from structattn.structures.providers.base import adjacency_from_edges
from structattn.structures.structure import Structure


def _single(structure: Structure, who: str) -> Structure:
    if structure.is_batched:
        raise ValueError(f"{who} takes one sentence's structure; index the batch per sentence")
    return structure


def to_edge_index(structure: Structure) -> torch.Tensor:
    """``(2, E)`` long edge list of the adjacency (self-loops removed; both directions for undirected)."""
    s = _single(structure, "to_edge_index")
    edge_index, _ = dense_to_sparse(s.dense_adjacency().to(torch.long))
    return remove_self_loops(edge_index)[0]


def from_edge_index(edge_index: torch.Tensor, num_nodes: int, directed: bool = False, source: str = "edge_index") -> Structure:
    """Structure whose adjacency is ``edge_index`` (+ self-loops) and whose distance is its hop count.

    Shapes:
        edge_index: ``(2, E)``; returns ``(num_nodes, num_nodes)`` fields.
    """
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"from_edge_index: node ids must lie in [0, {num_nodes}), got {edge_index.min()}..{edge_index.max()}")
    token_mask = torch.ones(1, num_nodes, dtype=torch.bool)
    rows = torch.cat([torch.zeros(1, edge_index.shape[1], dtype=torch.long), edge_index.long()])
    distance = graph_distances(rows, token_mask, directed=directed)[0]
    adjacency = adjacency_from_edges(rows, token_mask, directed)[0]
    return Structure(distance=distance, adjacency=adjacency, token_mask=token_mask[0], directed=directed, source=source)


def to_pyg(structure: Structure) -> Data:
    """A torch_geometric ``Data`` with ``edge_index``, ``num_nodes`` and the dense ``distance`` as an attribute."""
    s = _single(structure, "to_pyg")
    return Data(edge_index=to_edge_index(s), num_nodes=s.num_tokens, distance=s.dense_distance())


def from_pyg(data: Data, directed: bool = False) -> Structure:
    """Structure from a torch_geometric ``Data`` (its ``edge_index`` and ``num_nodes``)."""
    return from_edge_index(data.edge_index, int(data.num_nodes), directed=directed, source="pyg")


def to_networkx(structure: Structure) -> nx.Graph:
    """An ``nx.Graph`` (``nx.DiGraph`` when directed) over the real tokens with the adjacency's edges."""
    s = _single(structure, "to_networkx")
    graph = nx.DiGraph() if s.directed else nx.Graph()
    n = int(s.token_mask.sum())
    graph.add_nodes_from(range(n))
    graph.add_edges_from(to_edge_index(s).T.tolist())
    return graph


def from_networkx(graph: nx.Graph, source: str = "networkx") -> Structure:
    """Structure from a networkx graph whose nodes are ``0..n-1`` (a relabelled copy is made otherwise, in
    sorted node order)."""
    nodes = sorted(graph.nodes)
    if nodes != list(range(len(nodes))):
        graph = nx.relabel_nodes(graph, {v: i for i, v in enumerate(nodes)})
    if len(nodes) == 0:
        raise ValueError("from_networkx: empty graph")
    edges = torch.tensor(list(graph.edges), dtype=torch.long).reshape(-1, 2).T
    return from_edge_index(edges, len(nodes), directed=graph.is_directed(), source=source)
