"""networkx oracles for the providers, written from each provider's documented definition."""

from __future__ import annotations

import random
from itertools import combinations

import networkx as nx
import numpy as np

from structattn.structures import Document, Mention, Sentence


def distances_from_graph(graph: nx.Graph, n: int) -> np.ndarray:
    """All-pairs hops with -1 for unreachable, via networkx."""
    out = np.full((n, n), -1, dtype=np.int64)
    for i, row in nx.all_pairs_shortest_path_length(graph):
        for j, d in row.items():
            out[i, j] = d
    return out


def random_heads(n: int, rng: random.Random) -> list[int]:
    """A uniformly shuffled random recursive tree as 0-based heads with -1 root."""
    order = list(range(n))
    rng.shuffle(order)
    heads = [-1] * n
    for k in range(1, n):
        heads[order[k]] = order[rng.randrange(k)]
    return heads


def random_sentence(n: int, rng: random.Random, sid: str) -> Sentence:
    """Sentence with a random tree, random extra semantic edges and random coreference clusters."""
    heads = random_heads(n, rng)
    edges = [(h, d, "dep") for d, h in enumerate(heads) if h >= 0 and rng.random() < 0.8]
    edges += [(rng.randrange(n), rng.randrange(n), "extra") for _ in range(rng.randrange(n // 2 + 1))]
    edges = [e for e in edges if e[0] != e[1]]
    coref = []
    for _ in range(rng.randrange(3)):
        cluster = []
        for _ in range(rng.randrange(1, 4)):
            start = rng.randrange(n)
            end = min(n, start + rng.randrange(1, 4))
            cluster.append((start, end))
        coref.append(cluster)
    return Sentence([f"w{i}" for i in range(n)], heads=heads, edges=edges, coref=coref, id=sid)


def dependency_graph(sentence: Sentence) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(len(sentence)))
    g.add_edges_from((i, h) for i, h in enumerate(sentence.heads) if h >= 0)
    return g


def semantic_graph(sentence: Sentence) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(len(sentence)))
    g.add_edges_from((e.head, e.dependent) for e in sentence.edges if e.head >= 0)
    return g


def coreference_graph(words: int, clusters: list[list[Mention]], heads: list[int] | None) -> nx.Graph:
    """Each word of a mention -- its head word; head words of one entity pairwise linked."""
    g = nx.Graph()
    g.add_nodes_from(range(words))
    for cluster in clusters:
        chosen = []
        for m in cluster:
            if m.head is not None:
                head = m.head
            elif heads is not None:
                outside = [i for i in range(m.start, m.end) if not m.start <= heads[i] < m.end]
                head = outside[0] if outside else m.end - 1
            else:
                head = m.end - 1
            chosen.append(head)
            g.add_edges_from((i, head) for i in range(m.start, m.end) if i != head)
        g.add_edges_from(combinations(set(chosen), 2))
    return g


def random_document(rng: random.Random, sid: str) -> Document:
    sentences = [random_sentence(rng.randrange(1, 9), rng, f"{sid}-{k}") for k in range(rng.randrange(1, 4))]
    total = sum(len(s) for s in sentences)
    clusters = []
    for _ in range(rng.randrange(1, 3)):
        cluster = []
        for _ in range(rng.randrange(1, 4)):
            start = rng.randrange(total)
            cluster.append((start, min(total, start + rng.randrange(1, 3))))
        clusters.append(cluster)
    return Document(sentences, coref=clusters, id=sid)
