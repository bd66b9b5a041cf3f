"""Subject-verb agreement: planned subjects with a chosen number of attractors, and the agreement record.

An *attractor* is a noun of the opposite number standing between the subject's head noun and its verb
(Linzen et al. 2016, "Assessing the ability of LSTMs to learn syntax-sensitive dependencies"). Here every
word between the subject and the main verb belongs to the subject NP (its PPs and relative clauses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from structattn.structures.generators.builder import SentenceBuilder
from structattn.structures.generators.lexicon import NOUNS, SING, other_number, other_verb_form
from structattn.structures.generators.phrases import InnerNP, Phrase, PhraseRules

MODIFIER_KINDS = ("pp", "pp", "subject", "object")  # PPs twice as likely as each kind of relative clause


@dataclass(frozen=True)
class Modifier:
    """One noun of a planned subject: introduced by a ``"pp"``, a ``"subject"`` relative (``that chases
    the cats``) or an ``"object"`` relative (``that the cats chase``); ``nested`` attaches it to the noun of
    the previous modifier instead of the current head."""

    number: str
    kind: str
    nested: bool


def plan_subject(rules: PhraseRules, attractors: int) -> tuple[str, list[Modifier]]:
    """The subject's number and a modifier plan with exactly ``attractors`` nouns of the other number
    (plus up to one noun of the subject's own number)."""
    rng = rules.rng
    number = rules.number()
    total = attractors + rng.randint(0, 1)
    opposite = set(rng.sample(range(total), attractors))
    return number, [
        Modifier(
            other_number(number) if k in opposite else number,
            rng.choice(MODIFIER_KINDS),
            nested=k > 0 and rules.chance(0.5),
        )
        for k in range(total)
    ]


def planned_np(rules: PhraseRules, b: SentenceBuilder, number: str, plan: list[Modifier]) -> Phrase:
    """A subject NP realising ``plan``: one noun per modifier, in order, no other nouns."""
    noun = rules.rng.choice(NOUNS)
    node, head = rules.base_np(b, noun, number)
    i = 0
    while i < len(plan):
        j = i + 1
        while j < len(plan) and plan[j].nested:
            j += 1
        mod, rest = plan[i], plan[i + 1 : j]
        inner: InnerNP = lambda b, m=mod, rest=rest: planned_np(rules, b, m.number, rest)  # noqa: E731
        if mod.kind == "pp":
            node = ("NP", [node, rules.pp(b, 0, head, "nmod", inner)])
        else:
            node = ("NP", [node, rules.relative(b, 0, head, noun, number, mod.kind, inner)])
        i = j
    return node, head, number


def agreement_meta(b: SentenceBuilder) -> dict[str, Any]:
    """The main clause's agreement record: ``verb_index``, ``subject_index``, ``verb_number``,
    ``num_attractors`` and ``wrong_verb_form`` (the verb in the other number)."""
    verb = b.heads.index(-1)
    subject = next(i for i, (h, r) in enumerate(zip(b.heads, b.deprels)) if h == verb and r == "nsubj")
    number = b.number[subject] or SING
    attractors = sum(
        1 for k in range(subject + 1, verb) if b.upos[k] == "NOUN" and b.number[k] not in (None, number)
    )
    return {
        "subject_index": subject,
        "verb_index": verb,
        "verb_number": b.number[verb],
        "num_attractors": attractors,
        "wrong_verb_form": other_verb_form(b.words[verb]),
    }
