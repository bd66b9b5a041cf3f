"""CorefUD 1.0 coreference (``Entity=`` in MISC) -> mentions clustered by entity id.

Format (Nedoluzhko et al., CorefUD 1.0; the layout udapi reads and writes): the document's
``# global.Entity = eid-etype-head-other`` comment names the ``-``-separated fields of an opening bracket.
``Entity=(e1-person-2`` opens a mention of entity ``e1`` whose head is its 2nd node, ``e1)`` closes it,
``(e2-place-1)`` is a one-node mention; several chunks follow each other without separators
(``Entity=e1)(e3-place-1(e4-person-1)``). A discontinuous mention is written as subspans ``e5[1/2]`` ...
``e5[2/2]``. Mentions never cross a sentence boundary in this format.

What the library keeps: a mention is the half-open span ``[start, end)`` of the words from its first to its
last node (a discontinuous mention becomes the span covering its parts); its head is the absolute index of
the node the head field names (counted over the mention's nodes, empty nodes included, as in CorefUD), or
``None`` when that node is an empty node or no head is given. Mentions made only of empty nodes (zero
pronouns) are dropped with the empty nodes. ``Bridge`` and ``SplitAnte`` are not read. Without a
``global.Entity`` comment the default ``eid-etype-head-other`` is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from structattn.structures.readers._rows import Locator, Row
from structattn.structures.sentence import Mention

DEFAULT_FIELDS = ("eid", "etype", "head", "other")
FORBIDDEN_IN_ID = "-=| \t()"
_CHUNK = re.compile(r"\(([^()]+)(\)?)|([^()]+)\)")
_SUBSPAN = re.compile(r"^(.+)\[(\d+)/(\d+)\]$")


@dataclass
class _Open:
    raw: str  # the id as written, with a ``[k/m]`` subspan suffix if any
    eid: str  # without the subspan suffix
    part: int  # subspan number (1 for a continuous mention)
    parts: int
    head: int | None
    row: Row
    start: int  # node position of the opening bracket
    nodes: list[int] = field(default_factory=list)


class EntityReader:
    """Reads the ``Entity`` chunks of one sentence's nodes (words and empty nodes, in file order)."""

    def __init__(self, rows: list[Row], fields: tuple[str, ...], locate: Locator) -> None:
        self.nodes = [r for r in rows if r.kind != "range"]
        self.word_of = [r.key[0] - 1 if r.kind == "word" else None for r in self.nodes]
        self.fields, self.locate = fields, locate
        self.open: dict[str, list[_Open]] = {}  # raw eid (with [k/m]) -> stack of open brackets
        self.partial: dict[str, list[int]] = {}  # eid -> nodes of a discontinuous mention read so far
        self.mentions: dict[str, list[Mention]] = {}

    def read(self) -> tuple[list[list[Mention]], list[str]]:
        """Return ``(clusters, entity_ids)``: mentions sorted by ``(start, -end)``, clusters by first mention."""
        for position, row in enumerate(self.nodes):
            if row.entity:
                self._read_chunks(position, row)
        for stack in self.open.values():
            if stack:
                row = stack[0].row
                raise self.locate.error(row, f"entity bracket '({stack[0].raw}' at {self.locate.token(row)} is never "
                                             "closed in this sentence (CorefUD mentions cannot cross sentences)")
        for eid in self.partial:
            raise self.locate.error(None, f"discontinuous mention of entity {eid!r} is missing its last part")
        order = {eid: k for k, eid in enumerate(self.mentions)}
        clusters = [(eid, sorted(ms, key=lambda m: (m.start, -m.end))) for eid, ms in self.mentions.items() if ms]
        clusters.sort(key=lambda c: (c[1][0].start, -c[1][0].end, order[c[0]]))
        return [ms for _, ms in clusters], [eid for eid, _ in clusters]

    def _read_chunks(self, position: int, row: Row) -> None:
        matches = list(_CHUNK.finditer(row.entity))
        if "".join(m.group(0) for m in matches) != row.entity:
            raise self.locate.error(row, f"{self.locate.token(row)}: malformed Entity={row.entity!r} in MISC")
        for match in matches:
            opening, single, closing = match.groups()
            if closing is not None:
                self._close(closing, position, row)
            else:
                bracket = self._open(opening, position, row)
                if single:
                    bracket.nodes.append(position)
                    self._finish(bracket)
                else:
                    self.open.setdefault(bracket.raw, []).append(bracket)

    def _open(self, chunk: str, position: int, row: Row) -> _Open:
        values = dict(zip(self.fields, chunk.split("-")))
        raw = values.get("eid", "")
        if not raw:
            raise self.locate.error(row, f"{self.locate.token(row)}: Entity chunk '({chunk}' has no entity id")
        head = values.get("head") or None
        if head is not None and not head.isdigit():
            raise self.locate.error(row, f"{self.locate.token(row)}: Entity chunk '({chunk}' has head {head!r}, "
                                         "not a number")
        eid, part, parts = raw, 1, 1
        sub = _SUBSPAN.match(raw)
        if sub:
            eid, part, parts = sub.group(1), int(sub.group(2)), int(sub.group(3))
        self.mentions.setdefault(eid, [])
        return _Open(raw, eid, part, parts, None if head is None else int(head), row, position)

    def _close(self, raw: str, position: int, row: Row) -> None:
        stack = self.open.get(raw)
        if not stack:
            raise self.locate.error(row, f"{self.locate.token(row)} closes entity {raw!r}, which is not open")
        bracket = stack.pop()
        bracket.nodes.extend(range(bracket.start, position + 1))
        self._finish(bracket)

    def _finish(self, bracket: _Open) -> None:
        if bracket.parts > 1:
            known = self.partial.get(bracket.eid)
            if (bracket.part == 1) != (known is None):
                problem = "has no first part" if known is None else "starts before the previous one is complete"
                where = self.locate.token(bracket.row)
                raise self.locate.error(bracket.row, f"{where}: part {bracket.part}/{bracket.parts} of a "
                                                     f"discontinuous mention of {bracket.eid!r} {problem}")
            nodes = (known or []) + bracket.nodes
            if bracket.part < bracket.parts:
                self.partial[bracket.eid] = nodes
                return
            del self.partial[bracket.eid]
            bracket.nodes = nodes
        self._add_mention(bracket)

    def _add_mention(self, bracket: _Open) -> None:
        words = [self.word_of[p] for p in bracket.nodes if self.word_of[p] is not None]
        if bracket.head is not None and not 1 <= bracket.head <= len(bracket.nodes):
            raise self.locate.error(bracket.row, f"mention of entity {bracket.eid!r} opened at "
                                                 f"{self.locate.token(bracket.row)} has head {bracket.head}, but only "
                                                 f"{len(bracket.nodes)} nodes")
        if not words:
            return  # a mention of empty nodes only: dropped with them
        head = None if bracket.head is None else self.word_of[bracket.nodes[bracket.head - 1]]
        self.mentions[bracket.eid].append(Mention(min(words), max(words) + 1, head))
