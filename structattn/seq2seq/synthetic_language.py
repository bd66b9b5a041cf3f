"""A synthetic target language made from the gold tree of a :class:`GrammarGenerator` sentence.

The target of a source sentence is a deterministic function of its labelled tree (not of its word order):

* **head-final order**: each head comes after its dependents (verb-final clauses, modifiers before nouns),
  except ``case`` and ``punct`` dependents, which follow their head (postpositions, final full stop);
  dependents of one head are ordered by relation (:data:`RELATION_ORDER`), ties by their linearised subtree;
* **lexicon**: every source word form maps to a made-up stem (three consonant-vowel syllables drawn from a
  hash of the word: deterministic, no table to ship);
* **agreement suffixes**: nouns carry number (``ri`` plural) and case from their relation (:data:`CASE`,
  conjuncts take their first conjunct's case); determiners and adjectives agree with their noun's number
  (``n`` plural); verbs agree with their object's number (``ta`` plural, ``ke`` singular, none without one).

So a correct translation needs the source tree: where each phrase goes, which noun an adjective belongs to
and whether a verb's object is plural are all read off the heads.
"""

from __future__ import annotations

import hashlib

from structattn.structures.sentence import Sentence, describe_sentence

RELATION_ORDER = ("nsubj", "obj", "obl", "nmod", "acl:relcl", "det", "amod", "cc", "conj", "case", "punct")
FOLLOWS_HEAD = frozenset({"case", "punct"})
CASE = {"nsubj": "ga", "obj": "o", "obl": "ni", "nmod": "no"}
CONSONANTS, VOWELS = "bdgklmnprstvz", "aeiou"


def stem(word: str) -> str:
    """The made-up target stem of a source word (punctuation maps to itself)."""
    if not any(c.isalpha() for c in word):
        return word
    digest = hashlib.sha256(word.lower().encode()).digest()
    return "".join(CONSONANTS[digest[2 * k] % len(CONSONANTS)] + VOWELS[digest[2 * k + 1] % len(VOWELS)] for k in range(3))


def translate_tree(sentence: Sentence) -> list[str]:
    """The target words of a sentence with gold ``heads``, ``deprels``, ``upos`` and ``meta["feats"]``.

    Raises:
        ValueError: naming the sentence when an annotation is missing.
    """
    feats = sentence.meta.get("feats")
    if sentence.heads is None or sentence.deprels is None or sentence.upos is None or feats is None:
        raise ValueError(f"{describe_sentence(sentence.id)}: the synthetic target language needs heads, deprels, "
                         "upos and meta['feats'] (GrammarGenerator sentences have them)")
    children: list[list[int]] = [[] for _ in sentence.words]
    for i, h in enumerate(sentence.heads):
        if h >= 0:
            children[h].append(i)
    forms = [_form(sentence, i, children, feats) for i in range(len(sentence))]
    return _linearise(sentence.heads.index(-1), sentence.deprels, children, forms)


def _linearise(node: int, deprels: list[str], children: list[list[int]], forms: list[str]) -> list[str]:
    parts = [(RELATION_ORDER.index(deprels[c]) if deprels[c] in RELATION_ORDER else len(RELATION_ORDER),
              _linearise(c, deprels, children, forms), deprels[c] in FOLLOWS_HEAD) for c in children[node]]
    parts.sort(key=lambda p: (p[0], p[1]))
    before = [w for rank, words, after in parts if not after for w in words]
    after = [w for rank, words, after in parts if after for w in words]
    return before + [forms[node]] + after


def _form(sentence: Sentence, i: int, children: list[list[int]], feats: list[str]) -> str:
    upos, word = sentence.upos[i], stem(sentence.words[i])
    plural = "Number=Plur" in feats[i]
    if upos in ("NOUN", "PROPN"):
        return word + ("ri" if plural else "") + CASE.get(_case_relation(sentence, i), "")
    if upos in ("DET", "ADJ") and sentence.heads[i] >= 0:
        return word + ("n" if "Number=Plur" in feats[sentence.heads[i]] else "")
    if upos == "VERB":
        objects = [c for c in children[i] if sentence.deprels[c] == "obj"]
        if objects:
            return word + ("ta" if "Number=Plur" in feats[objects[0]] else "ke")
    return word


def _case_relation(sentence: Sentence, i: int) -> str:
    """The relation that gives a noun its case: its own, or its first conjunct's for ``conj``."""
    while sentence.deprels[i] == "conj" and sentence.heads[i] >= 0:
        i = sentence.heads[i]
    return sentence.deprels[i]
