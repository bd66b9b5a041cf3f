"""``semantic``: hops in the undirected enhanced-UD / semantic dependency graph."""

from __future__ import annotations

from structattn.structures.providers.base import GraphProvider, Item, register_provider
from structattn.structures.sentence import Document, SemanticEdge


def item_edges(item: Item) -> list[SemanticEdge]:
    """Semantic edges over the item's words (a document's sentences are shifted by their offsets)."""
    if isinstance(item, Document):
        return [
            e.shifted(off)
            for s, off in zip(item.sentences, item.offsets)
            for e in s.edges
        ]
    return list(item.edges)


@register_provider("semantic")
class SemanticProvider(GraphProvider):
    """Shortest-path hops in the undirected graph of ``Sentence.edges`` (enhanced UD from the CoNLL-U DEPS
    column, or DM/PAS/PSD from SDP files). Words may have several heads, reentrancies are fine, and words in
    disconnected parts (e.g. SDP's unattached punctuation) are unreachable (-1). Root/top edges (head -1)
    add no edge. Adjacency: head-dependent pairs plus self-loops, symmetric."""

    requires = ("edges",)
    symmetric = True  # undirected tree / graph: distance[i, j] == distance[j, i]

    def graph_edges(self, item: Item) -> list[tuple[int, int]]:
        return [(e.dependent, e.head) for e in item_edges(item) if e.head >= 0 and e.head != e.dependent]
