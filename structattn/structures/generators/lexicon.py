"""The lexicon of the synthetic grammar, written for this library.

Every noun and verb has a singular and a plural (present-tense) form; verbs are regular English verbs whose
singular (3rd person) form ends in ``-s`` and whose plural form does not. Nouns carry a gender used to pick
pronouns (``"m"``/``"f"`` for persons, ``"n"`` for animals and things) and ``who`` vs ``which``.
"""

from __future__ import annotations

from dataclasses import dataclass

SING, PLUR = "Sing", "Plur"


def other_number(number: str) -> str:
    """The opposite grammatical number."""
    return PLUR if number == SING else SING


@dataclass(frozen=True)
class Noun:
    """A count noun: ``singular``/``plural`` forms and gender (``"m"``, ``"f"`` or ``"n"``)."""

    singular: str
    plural: str
    gender: str

    def form(self, number: str) -> str:
        return self.singular if number == SING else self.plural

    @property
    def is_person(self) -> bool:
        return self.gender in ("m", "f")


@dataclass(frozen=True)
class Verb:
    """A present-tense verb: 3rd person ``singular`` and ``plural`` forms; ``transitive`` takes an object."""

    singular: str
    plural: str
    transitive: bool

    def form(self, number: str) -> str:
        return self.singular if number == SING else self.plural


_PERSONS = "man men m|woman women f|boy boys m|girl girls f|king kings m|queen queens f|teacher teachers f|" \
    "doctor doctors m|farmer farmers m|author authors f|pilot pilots m|singer singers f"
_OTHERS = "dog dogs|cat cats|horse horses|bird birds|mouse mice|key keys|cabinet cabinets|door doors|" \
    "table tables|book books|letter letters|box boxes|house houses|garden gardens|bridge bridges|car cars|" \
    "window windows|picture pictures|river rivers|city cities|tree trees|apple apples|egg eggs|island islands"
NOUNS: tuple[Noun, ...] = tuple(Noun(*entry.split()) for entry in _PERSONS.split("|")) + tuple(
    Noun(*entry.split(), "n") for entry in _OTHERS.split("|")
)

_TRANSITIVE = "chases chase|sees see|likes like|admires admire|follows follow|carries carry|finds find|" \
    "watches watch|helps help|paints paint|visits visit|remembers remember|fixes fix|pushes push|" \
    "describes describe|avoids avoid"
_INTRANSITIVE = "sleeps sleep|runs run|laughs laugh|waits wait|arrives arrive|smiles smile|falls fall|" \
    "sings sing|works work|swims swim|appears appear|disappears disappear"
TRANSITIVE_VERBS: tuple[Verb, ...] = tuple(Verb(*entry.split(), True) for entry in _TRANSITIVE.split("|"))
INTRANSITIVE_VERBS: tuple[Verb, ...] = tuple(Verb(*entry.split(), False) for entry in _INTRANSITIVE.split("|"))

ADJECTIVES: tuple[str, ...] = tuple(
    "big small old young red happy quiet strange tall green bright heavy ancient angry empty famous".split()
)
PREPOSITIONS: tuple[str, ...] = tuple("near behind beside under above with from by".split())
DETERMINERS: dict[str, tuple[str, ...]] = {SING: ("the", "a", "this", "every"), PLUR: ("the", "some", "these", "those")}
CONJUNCTIONS: tuple[str, ...] = ("and", "or")

_PRONOUNS = {
    (SING, "m"): ("he", "him"),
    (SING, "f"): ("she", "her"),
    (SING, "n"): ("it", "it"),
    (PLUR, "m"): ("they", "them"),
    (PLUR, "f"): ("they", "them"),
    (PLUR, "n"): ("they", "them"),
}


def personal_pronoun(number: str, gender: str, subject: bool) -> str:
    """``he``/``him``, ``she``/``her``, ``it``, ``they``/``them`` for an antecedent's number and gender."""
    nominative, accusative = _PRONOUNS[(number, gender)]
    return nominative if subject else accusative


def article(determiner: str, next_word: str) -> str:
    """``a`` becomes ``an`` before a vowel."""
    return "an" if determiner == "a" and next_word[0] in "aeiou" else determiner


_OTHER_FORM = {
    form: other
    for verb in TRANSITIVE_VERBS + INTRANSITIVE_VERBS
    for form, other in ((verb.singular, verb.plural), (verb.plural, verb.singular))
}


def other_verb_form(form: str) -> str:
    """``chases`` -> ``chase`` and back."""
    return _OTHER_FORM[form]
