"""Enhanced dependencies (the DEPS column) as :class:`SemanticEdge` s, with empty nodes collapsed.

Empty nodes (``8.1``, elided predicates in gapping and the like) are not words, so no structure can put
them on the token axis. They are removed, and every dependent ``d`` of an empty node ``e`` (``d`` has
``e:label`` in DEPS) is attached to each head of ``e`` with ``d``'s own label. A path ``h -> e -> d`` thus
becomes the single edge ``h -> d``: one hop shorter, and the enhanced graph stays connected. Heads of an
empty node that is itself headed by empty nodes are resolved transitively; an edge from a word to itself
that the collapsing produces is dropped.

An empty node whose only head is the root (``0:root``: an elided main predicate, as in "And so on." or
Czech "A co postoj Austrálie?") has no word to hand its dependents to, and attaching them all to the root
would cut the graph into pieces. One of its word dependents stands in for it instead: the root of the
basic tree when it is among them (the word basic UD promoted into the elided predicate's place), else the
first dependent in word order. The stand-in takes the empty node's root edge (with its own label) and
every other dependent of the empty node is attached to the stand-in, so the graph stays connected and the
stand-in is one hop closer to its co-dependents than the empty node was.

Edges come out deduplicated and sorted by ``(dependent, head, label)``, the order CoNLL-U's DEPS column
(sorted by head) gives; the writer relies on it for identical round trips.
"""

from __future__ import annotations

from structattn.structures.readers._rows import Locator, NodeKey, Row
from structattn.structures.sentence import SemanticEdge


def _key_label(key: NodeKey) -> str:
    return str(key) if isinstance(key, int) else f"{key[0]}.{key[1]}"


class _Resolver:
    """Maps a DEPS head (word id, 0 = root, or empty node) to library heads (0-based, -1 root)."""

    def __init__(self, rows: list[Row], locate: Locator) -> None:
        self.n = sum(r.kind == "word" for r in rows)
        self.empty = {r.key: r for r in rows if r.kind == "empty"}
        self.locate = locate
        self.dependents: dict[NodeKey, list[int]] = {}  # empty node -> its word dependents (0-based, in order)
        for r in rows:
            if r.kind == "word":
                for head_key, _ in r.deps or ():
                    if not isinstance(head_key, int) and r.key[0] - 1 not in self.dependents.get(head_key, []):
                        self.dependents.setdefault(head_key, []).append(r.key[0] - 1)
        self.basic_root = next((r.key[0] - 1 for r in rows if r.kind == "word" and r.head == 0), None)

    def heads(self, key: NodeKey, row: Row, trail: tuple[NodeKey, ...] = ()) -> list[int]:
        if isinstance(key, int):
            if not 0 <= key <= self.n:
                raise self.locate.error(
                    row, f"{self.locate.token(row)} has DEPS head {key}, but the sentence has {self.n} words"
                )
            return [key - 1]
        if key not in self.empty:
            raise self.locate.error(row, f"{self.locate.token(row)} names empty node {_key_label(key)} in DEPS, "
                                         "but the sentence has no such node")
        if key in trail:
            cycle = " -> ".join(_key_label(k) for k in trail + (key,))
            raise self.locate.error(row, f"empty nodes form a cycle in DEPS: {cycle}")
        node = self.empty[key]
        if not node.deps:
            raise self.locate.error(node, f"{self.locate.token(node)} has no DEPS (an empty node needs a head)")
        heads = [h for head_key, _ in node.deps for h in self.heads(head_key, node, trail + (key,))]
        stand_in = self.stand_in(key) if all(h == -1 for h in heads) else None
        if stand_in is None:
            return heads
        return heads if row.kind == "word" and row.key[0] - 1 == stand_in else [stand_in]

    def stand_in(self, key: NodeKey) -> int | None:
        """The word that replaces a root-only empty node (see the module docstring), ``None`` without word
        dependents."""
        dependents = self.dependents.get(key, [])
        if not dependents:
            return None
        return self.basic_root if self.basic_root in dependents else dependents[0]


def enhanced_edges(rows: list[Row], locate: Locator) -> list[SemanticEdge] | None:
    """Edges of the enhanced graph over the words, or ``None`` when no word has DEPS.

    Raises:
        ValueError: a DEPS head out of range, an unknown empty node, a word heading itself, an empty node
            without DEPS, or empty nodes heading each other in a cycle; located at the offending line.
    """
    words = [r for r in rows if r.kind == "word"]
    if all(r.deps is None for r in words):
        return None
    resolver = _Resolver(rows, locate)
    edges: set[SemanticEdge] = set()
    for i, row in enumerate(words):
        for head_key, label in row.deps or ():
            if head_key == i + 1:
                raise locate.error(row, f"{locate.token(row)} is its own head in DEPS")
            for head in resolver.heads(head_key, row):
                if head != i:
                    edges.add(SemanticEdge(head, i, label))
    return sorted(edges, key=lambda e: (e.dependent, e.head, e.label))
