"""Phrase rules of the synthetic English-like grammar (used by :class:`GrammarGenerator`).

Each rule appends its tokens in surface order to a :class:`SentenceBuilder`, attaches them UD-style and
returns its constituent. ``depth`` counts embeddings (a PP, a relative clause, a coordination); rules add
no further embedding once ``depth == max_depth``, so every derivation is finite.
"""

from __future__ import annotations

import random
from typing import Callable, Optional

from structattn.structures.generators.builder import Node, SentenceBuilder
from structattn.structures.generators.config import GrammarConfig
from structattn.structures.generators.discourse import Discourse
from structattn.structures.generators.lexicon import (
    ADJECTIVES, CONJUNCTIONS, DETERMINERS, INTRANSITIVE_VERBS, NOUNS, PLUR, PREPOSITIONS, SING,
    TRANSITIVE_VERBS, Noun, article, personal_pronoun,
)

#: What an NP rule returns: (constituent, head token, grammatical number).
Phrase = tuple[Node, int, str]
InnerNP = Callable[[SentenceBuilder], Phrase]


class PhraseRules:
    """The grammar's rules, drawing every choice from ``rng``; ``discourse`` is set while writing a document."""

    def __init__(self, rng: random.Random, config: GrammarConfig) -> None:
        self.rng = rng
        self.config = config
        self.discourse: Optional[Discourse] = None

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def number(self) -> str:
        return PLUR if self.chance(self.config.p_plural) else SING

    def embeds(self, depth: int, p: float) -> bool:
        return depth < self.config.max_depth and self.chance(p)

    # -- clauses -----------------------------------------------------------------------------------------
    def clause(self, b: SentenceBuilder, subject: Optional[InnerNP] = None) -> Node:
        """``S -> NP VP .``; ``subject`` overrides the subject NP rule."""
        subj_node, subj, number = subject(b) if subject else self.np(b, 0, "subj")
        vp_node, verb = self.vp(b, 0, subj, number)
        b.attach(verb, -1, "root")
        dot = b.token(".", "PUNCT", ".")
        b.attach(dot, verb, "punct")
        return ("S", [subj_node, vp_node, dot])

    def vp(self, b: SentenceBuilder, depth: int, subj: int, number: str) -> tuple[Node, int]:
        """``VP -> VP (CC VP)``; the subject attaches to the first verb (propagated in the enhanced graph)."""
        node, verb = self.simple_vp(b, depth, number)
        b.attach(subj, verb, "nsubj")
        if self.embeds(depth, self.config.p_coord):
            cc = b.token(self.rng.choice(CONJUNCTIONS), "CCONJ", "CC")
            other_node, other = self.simple_vp(b, depth + 1, number)
            b.attach(other, verb, "conj")
            b.attach(cc, other, "cc")
            node = ("VP", [node, cc, other_node])
        return node, verb

    def simple_vp(self, b: SentenceBuilder, depth: int, number: str) -> tuple[Node, int]:
        """``VP -> V (NP) (PP)``, the verb agreeing in ``number``."""
        transitive = self.chance(self.config.p_transitive)
        verb = self.verb(b, number, transitive)
        children: list = [verb]
        if transitive:
            obj_node, obj, _ = self.np(b, depth, "obj")
            b.attach(obj, verb, "obj")
            children.append(obj_node)
        if self.embeds(depth, self.config.p_pp):
            children.append(self.pp(b, depth + 1, verb, "obl"))
        return ("VP", children), verb

    def verb(self, b: SentenceBuilder, number: str, transitive: bool) -> int:
        verb = self.rng.choice(TRANSITIVE_VERBS if transitive else INTRANSITIVE_VERBS)
        return b.token(verb.form(number), "VERB", "VBZ" if number == SING else "VBP", number)

    def relative(
        self, b: SentenceBuilder, depth: int, antecedent: int, noun: Noun, number: str,
        kind: Optional[str] = None, inner: Optional[InnerNP] = None,
    ) -> Node:
        """``SBAR -> WHNP S``: a subject relative (``that chases the cat``) or an object relative
        (``that the cats chase``); ``inner`` overrides the NP inside the clause."""
        kind = kind or ("object" if self.chance(self.config.p_object_relative) else "subject")
        word = "that" if self.chance(0.5) else ("who" if noun.is_person else "which")
        pron = b.token(word, "PRON", "WP" if word == "who" else "WDT")
        if kind == "object":
            subj_node, subj, subj_number = inner(b) if inner else self.np(b, depth, "rsubj")
            verb = self.verb(b, subj_number, True)
            b.attach(subj, verb, "nsubj")
            b.attach(pron, verb, "obj")
            clause: Node = ("S", [subj_node, ("VP", [verb])])
        elif inner is not None:
            verb = self.verb(b, number, True)
            obj_node, obj, _ = inner(b)
            b.attach(pron, verb, "nsubj")
            b.attach(obj, verb, "obj")
            clause = ("S", [("VP", [verb, obj_node])])
        else:
            vp_node, verb = self.vp(b, depth, pron, number)
            clause = ("S", [vp_node])
        b.attach(verb, antecedent, "acl:relcl")
        return ("SBAR", [("WHNP", [pron]), clause])

    # -- noun phrases ------------------------------------------------------------------------------------
    def np(self, b: SentenceBuilder, depth: int, role: str, number: Optional[str] = None) -> Phrase:
        """``NP -> NP (PP) (SBAR)``, ``NP -> NP CC NP`` (never a subject, main or relative), or (in documents, main-clause
        subject/object) a pronoun or definite NP re-mentioning an earlier entity."""
        reused = self._reused_np(b, depth, role)
        if reused is not None:
            return reused
        start, number, noun = len(b), number or self.number(), self.rng.choice(NOUNS)
        node, head = self.base_np(b, noun, number)
        if self.embeds(depth, self.config.p_pp):
            node = ("NP", [node, self.pp(b, depth + 1, head, "nmod")])
        if self.embeds(depth, self.config.p_relative):
            node = ("NP", [node, self.relative(b, depth + 1, head, noun, number)])
        if self.discourse is not None:
            self.discourse.mention(self.discourse.new(noun, number), start, len(b), head)
        if role not in ("subj", "rsubj") and self.embeds(depth, self.config.p_coord):  # verbs agree with one noun
            cc = b.token(self.rng.choice(CONJUNCTIONS), "CCONJ", "CC")
            other_node, other, _ = self.np(b, depth + 1, "conj")
            b.attach(other, head, "conj")
            b.attach(cc, other, "cc")
            node = ("NP", [node, cc, other_node])
        return node, head, number

    def base_np(self, b: SentenceBuilder, noun: Noun, number: str, determiner: Optional[str] = None) -> tuple[Node, int]:
        """``NP -> DT (JJ) NN``; a given ``determiner`` (a re-mention: ``the dog``) comes without adjective."""
        adjective = self.rng.choice(ADJECTIVES) if not determiner and self.chance(self.config.p_adj) else None
        det = article(determiner or self.rng.choice(DETERMINERS[number]), adjective or noun.form(number))
        tokens = [b.token(det, "DET", "DT")]
        if adjective:
            tokens.append(b.token(adjective, "ADJ", "JJ"))
        head = b.token(noun.form(number), "NOUN", "NN" if number == SING else "NNS", number)
        for t, relation in zip(tokens, ("det", "amod")):
            b.attach(t, head, relation)
        return ("NP", tokens + [head]), head

    def pp(self, b: SentenceBuilder, depth: int, governor: int, relation: str, inner: Optional[InnerNP] = None) -> Node:
        """``PP -> IN NP`` attached to ``governor`` as ``nmod`` (nouns) or ``obl`` (verbs)."""
        prep = b.token(self.rng.choice(PREPOSITIONS), "ADP", "IN")
        node, head, _ = inner(b) if inner else self.np(b, depth, "pobj")
        b.attach(prep, head, "case")
        b.attach(head, governor, relation)
        return ("PP", [prep, node])

    def _reused_np(self, b: SentenceBuilder, depth: int, role: str) -> Optional[Phrase]:
        config, discourse = self.config, self.discourse
        if discourse is None or depth > 0 or role not in ("subj", "obj"):
            return None
        draw = self.rng.random()
        entity = discourse.pick(self.rng) if draw < config.p_pronoun + config.p_repeat else None
        if entity is None:
            return None
        start = len(b)
        if draw < config.p_pronoun:
            word = personal_pronoun(entity.number, entity.noun.gender, subject=role == "subj")
            head = b.token(word, "PRON", "PRP", entity.number)
            node: Node = ("NP", [head])
        else:
            node, head = self.base_np(b, entity.noun, entity.number, determiner="the")
        discourse.mention(entity, start, len(b), head)
        return node, head, entity.number
