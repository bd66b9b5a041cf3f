"""The synthetic target language is a function of the labelled tree, not of the source word order."""

import dataclasses
import random

import pytest

from structattn.seq2seq.corrupt import subtree
from structattn.seq2seq.synthetic_language import stem, translate_tree
from structattn.structures import GrammarGenerator, Sentence
from structattn.structures.generators.lexicon import NOUNS


def permuted(s: Sentence, seed: int) -> Sentence:
    """The same tree with the words placed in another order (heads renumbered)."""
    n = len(s)
    order = list(range(n))
    random.Random(seed).shuffle(order)  # new position of word i is order[i]
    inverse = {new: old for old, new in enumerate(order)}
    take = lambda values: [values[inverse[p]] for p in range(n)]  # noqa: E731
    heads = [-1 if s.heads[inverse[p]] == -1 else order[s.heads[inverse[p]]] for p in range(n)]
    meta = {**s.meta, "feats": take(s.meta["feats"])}
    return Sentence(words=take(s.words), heads=heads, deprels=take(s.deprels), upos=take(s.upos), id=s.id, meta=meta)


def test_same_tree_same_target_and_order_does_not_matter():
    for s in GrammarGenerator(seed=3).sentences(40):
        target = translate_tree(s)
        assert translate_tree(dataclasses.replace(s, meta=dict(s.meta))) == target
        assert translate_tree(permuted(s, seed=len(s))) == target


def test_head_final_postpositions_and_agreement_on_a_literal_case():
    # "the dogs see a cat ." : dogs plural subject, cat singular object
    s = Sentence(words=["the", "dogs", "see", "a", "cat", "."], heads=[1, 2, -1, 4, 2, 2],
                 deprels=["det", "nsubj", "root", "det", "obj", "punct"],
                 upos=["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
                 meta={"feats": ["_", "Number=Plur", "Number=Plur", "_", "Number=Sing", "_"]})
    expected = [stem("the") + "n", stem("dogs") + "riga", stem("a"), stem("cat") + "o", stem("see") + "ke", "."]
    assert translate_tree(s) == expected


def test_changing_one_head_changes_the_target():
    base = Sentence(words=["the", "dogs", "see", "a", "cat", "."], heads=[1, 2, -1, 4, 2, 2],
                    deprels=["det", "nsubj", "root", "det", "obj", "punct"],
                    upos=["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
                    meta={"feats": ["_", "Number=Plur", "Number=Plur", "_", "Number=Sing", "_"]})
    moved = dataclasses.replace(base, heads=[4, 2, -1, 4, 2, 2])  # "the" now modifies "cat"
    assert translate_tree(moved) != translate_tree(base)
    changed = 0
    sentences = [s for s in GrammarGenerator(seed=5).sentences(30) if len(s) > 4]
    rng = random.Random(0)
    for s in sentences:
        i = rng.choice([k for k, h in enumerate(s.heads) if h != -1])
        options = [j for j in range(len(s)) if j != s.heads[i] and j not in subtree(s.heads, i)]
        if not options:
            continue
        heads = list(s.heads)
        heads[i] = rng.choice(options)
        changed += translate_tree(dataclasses.replace(s, heads=heads)) != translate_tree(s)
    assert changed >= 0.9 * len(sentences)


def test_lexicon_is_one_to_one_on_the_grammar():
    words = {w.lower() for s in GrammarGenerator(seed=0).sentences(3000) for w in s.words}
    words |= {n.singular for n in NOUNS} | {n.plural for n in NOUNS}
    stems = {stem(w) for w in words}
    assert len(stems) == len(words)


def test_missing_annotation_names_the_sentence():
    with pytest.raises(ValueError, match="'s9'"):
        translate_tree(Sentence(words=["a", "b"], heads=[1, -1], id="s9"))
