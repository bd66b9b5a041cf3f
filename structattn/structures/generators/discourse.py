"""Discourse entities of a generated document: who was mentioned where, for pronouns and gold coreference."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from structattn.structures.generators.lexicon import Noun
from structattn.structures.sentence import Mention


@dataclass
class Entity:
    """A discourse referent introduced by a full NP (``noun`` in ``number``) in sentence ``first``."""

    noun: Noun
    number: str
    first: int
    index: int
    mentions: list[Mention] = field(default_factory=list)


class Discourse:
    """Entities of one document. Mention spans are absolute word indices over the whole document.

    An earlier entity may be re-mentioned (pronoun or definite NP) only when it was introduced in an earlier
    sentence and has not been mentioned in the current one, so that no sentence binds a pronoun or repeats a
    name inside its own clause (binding principles B and C).
    """

    def __init__(self) -> None:
        self.entities: list[Entity] = []
        self.sentence = -1
        self.offsets: list[int] = []
        self._used: set[int] = set()

    def start_sentence(self, offset: int) -> None:
        """Begin the next sentence, whose first word is word ``offset`` of the document."""
        self.sentence += 1
        self.offsets.append(offset)
        self._used = set()

    def new(self, noun: Noun, number: str) -> Entity:
        entity = Entity(noun, number, self.sentence, len(self.entities))
        self.entities.append(entity)
        return entity

    def pick(self, rng: random.Random) -> Entity | None:
        """A re-mentionable entity, preferring those mentioned in the previous sentence; ``None`` if none."""
        older = [e for e in self.entities if e.first < self.sentence and e.index not in self._used]
        previous = self.offsets[-2] if len(self.offsets) > 1 else 0
        recent = [e for e in older if e.mentions[-1].start >= previous]
        pool = recent or older
        return rng.choice(pool) if pool else None

    def mention(self, entity: Entity, start: int, end: int, head: int) -> None:
        """Record a mention of ``entity``: sentence-local span ``[start, end)`` with head word ``head``."""
        offset = self.offsets[-1]
        entity.mentions.append(Mention(start + offset, end + offset, head + offset))
        self._used.add(entity.index)

    def clusters(self) -> list[list[Mention]]:
        """Gold chains: entities mentioned at least twice, mentions in document order."""
        return [sorted(e.mentions, key=lambda m: (m.start, -m.end)) for e in self.entities if len(e.mentions) >= 2]
