"""``coreference``: a token graph linking mentions of the same entity."""

from __future__ import annotations

from itertools import combinations

from structattn.structures.providers.base import GraphProvider, Item, item_heads, register_provider
from structattn.structures.sentence import Mention, Sentence


def item_clusters(item: Item) -> list[list[Mention]]:
    """Clusters over the item's words: a document's own clusters, else its sentences' clusters shifted."""
    if isinstance(item, Sentence):
        return item.coref or []
    if item.coref is not None:
        return item.coref
    return [
        [m.shifted(off) for m in cluster]
        for s, off in zip(item.sentences, item.offsets)
        for cluster in (s.coref or [])
    ]


def mention_head(mention: Mention, heads: list[int] | None) -> int:
    """The mention's head word: the given one; else the first word of the span whose tree head lies outside
    the span; else (no tree) the span's last word."""
    if mention.head is not None:
        return mention.head
    if heads is not None:
        for i in range(mention.start, mention.end):
            if not mention.start <= heads[i] < mention.end:
                return i
    return mention.end - 1


@register_provider("coreference")
class CoreferenceProvider(GraphProvider):
    """Coreference graph over the tokens of a sentence or a whole :class:`Document`.

    Edges: every word of a mention is linked to the mention's head word (see :func:`mention_head`), and the
    head words of all mentions of one entity are linked pairwise. So two words of one mention are at most 2
    hops apart, mention heads of one entity 1 hop, any words of two coreferent mentions at most 3 hops;
    words outside every mention, and words of unrelated entities, are unreachable (-1). Nested mentions share
    words, which can join their entities' components (that is what the annotation says).
    """

    requires = ("coref",)
    symmetric = True  # undirected graph: distance[i, j] == distance[j, i]

    def graph_edges(self, item: Item) -> list[tuple[int, int]]:
        heads = item_heads(item)
        edges: list[tuple[int, int]] = []
        for cluster in item_clusters(item):
            cluster_heads = []
            for m in cluster:
                h = mention_head(m, heads)
                cluster_heads.append(h)
                edges.extend((i, h) for i in range(m.start, m.end) if i != h)
            edges.extend((a, b) for a, b in combinations(sorted(set(cluster_heads)), 2))
        return edges
