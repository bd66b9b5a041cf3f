"""Probing-task datasets of the SSAN study (Geng et al. 2020, "How Does Selective Mechanism Improve
Self-Attention Networks?"): word order (bigram shift, Conneau et al. 2018; word reordering detection,
Yang et al. 2019) and structure (tree depth and top constituents, Conneau et al. 2018).

Every builder takes Sentences with gold trees and a ``seed`` (an explicit ``random.Random(seed)``; no global
state) and returns :class:`ProbeExample` s in source order: a new, validated :class:`Sentence` plus its label.

Word-order tasks move words, and **the annotation follows the words**: if the word at old position ``o``
lands at new position ``p``, its head becomes the new position of its old head, and its deprel, UPOS,
enhanced edges and the per-token ``meta`` lists ``xpos`` / ``feats`` move with it. The tree therefore stays
the same tree over the same words (it may become non-projective, which a structure-aware model can notice).
Constituency brackets, coreference spans and multi-word tokens cannot follow a displaced word, so the
word-order builders drop them from **every** example, label 0 included, so that their presence never gives
the label away; other ``meta`` is dropped too (a ``text`` comment would be stale). Each example's ``meta``
holds ``source_id``, ``probe`` and ``label``.

Structure tasks keep the sentence unchanged (annotation and ``meta`` kept, plus the three keys above).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import Callable, Collection, Hashable, Iterable, Sequence

import numpy as np

from structattn.tasks.constituents import constituency_depth, top_constituents
from structattn.structures.trees import tree_depths
from structattn.tasks.base import IGNORE
from structattn.structures.sentence import SemanticEdge, Sentence

#: Per-token ``meta`` entries carried along when words move.
PER_TOKEN_META = ("xpos", "feats")
#: Upper bounds of the dependency tree-depth classes: ``<= 3``, ``4``, ``5``, ``>= 6`` (class 0..3). They are
#: the quartiles of the maximum depth over the bundled Czech PUD (1000 sentences: 301 / 254 / 234 / 211).
DEPENDENCY_DEPTH_BINS = (3, 4, 5)
OTHER = "OTHER"
#: The root's core dependents (UD core arguments and clausal complements) for the coarse top-constituent
#: analogue: the order of subject, objects and clausal complements around the predicate. The spaCy (ClearNLP)
#: names of the same relations are included, so that parsed English text gets the same analogue.
CORE_RELATIONS = ("nsubj", "obj", "iobj", "csubj", "ccomp", "nsubjpass", "dobj", "dative", "csubjpass")


@dataclass(frozen=True)
class ProbeExample:
    """One labelled example: the (possibly rearranged) sentence and its label."""

    sentence: Sentence
    label: Hashable


def rearranged(sentence: Sentence, order: Sequence[int], probe: str, label: Hashable) -> Sentence:
    """The sentence with ``new word p = old word order[p]``, its tree and tags following the words."""
    n = len(sentence)
    if sorted(order) != list(range(n)):
        raise ValueError(f"sentence {sentence.id!r}: {list(order)} is not a permutation of its {n} words")
    new = {old: p for p, old in enumerate(order)}

    def moved(values: list | None) -> list | None:
        return None if values is None else [values[o] for o in order]

    heads = None if sentence.heads is None else [-1 if sentence.heads[o] < 0 else new[sentence.heads[o]] for o in order]
    edges = None if sentence.edges is None else [
        SemanticEdge(-1 if e.head < 0 else new[e.head], new[e.dependent], e.label) for e in sentence.edges
    ]
    meta = {k: moved(sentence.meta[k]) for k in PER_TOKEN_META if _per_token(sentence, k)}
    meta.update(source_id=sentence.id, probe=probe, label=label)
    return Sentence(
        words=moved(sentence.words), heads=heads, deprels=moved(sentence.deprels), edges=edges,
        upos=moved(sentence.upos), id=f"{sentence.id}/{probe}", doc_id=sentence.doc_id,
        label_scheme=sentence.label_scheme, meta=meta,
    )


def _per_token(sentence: Sentence, key: str) -> bool:
    value = sentence.meta.get(key)
    return isinstance(value, list) and len(value) == len(sentence)


def _balanced_bits(count: int, rng: random.Random) -> list[int]:
    bits = [k % 2 for k in range(count)]
    rng.shuffle(bits)
    return bits


def bigram_shift_examples(sentences: Sequence[Sentence], seed: int = 0) -> list[ProbeExample]:
    """Bigram shift: label 1 = two adjacent words swapped, 0 = untouched; exactly balanced (+-1).

    Only swaps that change the word sequence are drawn (``words[i] != words[i + 1]``, position uniform among
    those); sentences with no such pair are skipped. The swapped position is ``meta["swapped"]`` (or None).
    """
    rng = random.Random(seed)
    eligible = [s for s in sentences if any(a != b for a, b in zip(s.words, s.words[1:]))]
    out = []
    for s, label in zip(eligible, _balanced_bits(len(eligible), rng)):
        order = list(range(len(s)))
        swapped = None
        if label:
            swapped = rng.choice([i for i in range(len(s) - 1) if s.words[i] != s.words[i + 1]])
            order[swapped], order[swapped + 1] = swapped + 1, swapped
        sentence = rearranged(s, order, "bigram_shift", label)
        sentence.meta["swapped"] = swapped
        out.append(ProbeExample(sentence, label))
    return out


def moved_order(n: int, origin: int, inserted: int) -> list[int]:
    """Old indices in new order after popping the word at ``origin`` and re-inserting it at ``inserted``."""
    rest = [i for i in range(n) if i != origin]
    return rest[:inserted] + [origin] + rest[inserted:]


def word_reordering_examples(sentences: Sequence[Sentence], seed: int = 0) -> list[ProbeExample]:
    """Word reordering detection (Yang et al. 2019): one word is popped and re-inserted elsewhere.

    Label: ``(inserted, origin)``, two position classes over ``0..n-1``: ``inserted`` is the index of the
    moved word in the new sentence, ``origin`` the index it had in the original one (equally the index in
    the new sentence where the gap closed). The pair is uniform over moves that change the word sequence;
    sentences with no such move (fewer than two distinct words) are skipped. Every sentence gets a move.
    ``meta["untouched"]`` is one other index, uniform over the rest (``None`` for a two-word sentence): the
    control word of the balanced tagging, see :func:`reorder_token_labels`.
    """
    rng = random.Random(seed)
    out = []
    for s in sentences:
        moves = [(b, a) for a, (lo, hi) in enumerate(_runs(s.words)) for b in range(len(s)) if not lo <= b <= hi]
        if not moves:
            continue
        inserted, origin = rng.choice(moves)
        label = (inserted, origin)
        others = [i for i in range(len(s)) if i not in label]
        sentence = rearranged(s, moved_order(len(s), origin, inserted), "word_reordering", label)
        sentence.meta["untouched"] = rng.choice(others) if others else None
        out.append(ProbeExample(sentence, label))
    return out


def _runs(words: list[str]) -> list[tuple[int, int]]:
    """For each word, the first and last index of the run of identical words around it. Moving word ``a`` to
    ``b`` leaves the sequence unchanged exactly when ``b`` lies inside that run (it only slides past copies)."""
    out, start = [], 0
    for i in range(1, len(words) + 1):
        if i == len(words) or words[i] != words[start]:
            out.extend([(start, i - 1)] * (i - start))
            start = i
    return out


def reorder_token_labels(n: int, label: tuple[int, int], untouched: int | None = None) -> list[int]:
    """Word reordering as token tags: 1 at the inserted word, 2 at the origin index, 0 elsewhere.

    With ``untouched`` (balanced tagging), only three words are scored: 1 and 2 as above and 0 at the
    ``untouched`` index; every other word is ``IGNORE`` (-100). Each sentence then contributes one target of
    each class, so the classes are exactly balanced and the majority baseline is 1/3, where tagging every
    word puts about nine targets in ten on class 0.
    """
    inserted, origin = label
    if untouched is not None and untouched in (inserted, origin):
        raise ValueError(f"untouched index {untouched} is one of the moved positions {label}")
    tags = [0] * n if untouched is None else [IGNORE] * n
    if untouched is not None:
        tags[untouched] = 0
    tags[inserted], tags[origin] = 1, 2
    return tags


def max_depths(sentences: Sequence[Sentence], source: str) -> list[int]:
    """Maximum depth per sentence: dependency hops from the root to the deepest word, or the constituency
    tree's depth (see :func:`~structattn.tasks.constituents.constituency_depth`)."""
    if source == "constituency":
        return [constituency_depth(s) for s in sentences]
    for s in sentences:
        if s.heads is None:
            raise ValueError(f"sentence {s.id!r} has no heads (a dependency tree is needed)")
    return [max(tree_depths(s.heads)) for s in sentences]


def quantile_bins(values: Sequence[int], num_classes: int) -> tuple[int, ...]:
    """Class upper bounds at the ``k / num_classes`` quantiles (``method="lower"``), duplicates removed."""
    qs = np.quantile(np.asarray(values), [k / num_classes for k in range(1, num_classes)], method="lower")
    return tuple(sorted({int(q) for q in qs}))


def depth_class(depth: int, bins: Sequence[int]) -> int:
    """Index of the bin: the number of upper bounds below ``depth``."""
    return sum(depth > t for t in bins)


def tree_depth_examples(
    sentences: Sequence[Sentence],
    seed: int = 0,
    bins: Sequence[int] | None = None,
    source: str = "auto",
    balance: bool = True,
) -> list[ProbeExample]:
    """Tree depth (Conneau et al. 2018): classify the maximum depth into bins.

    Args:
        bins: class upper bounds; default :data:`DEPENDENCY_DEPTH_BINS` for dependency depth and the
            quartiles of the given sentences (:func:`quantile_bins`) for constituency depth; pass them
            explicitly to share one definition across splits.
        source: ``"dependency"``, ``"constituency"`` or ``"auto"`` (constituency when every sentence has a
            tree, otherwise dependency).
        balance: downsample every class to the smallest one (seeded; source order kept).

    Raises:
        ValueError: when balancing and some class is empty.
    """
    source = _resolve(sentences, source)
    depths = max_depths(sentences, source)
    if bins is None:
        bins = DEPENDENCY_DEPTH_BINS if source == "dependency" else quantile_bins(depths, 4)
    labels = [depth_class(d, bins) for d in depths]
    keep = range(len(labels))
    if balance:
        keep = _balanced(labels, range(len(bins) + 1), random.Random(seed),
                         lambda sizes: f"cannot balance tree-depth classes: sizes per class {sizes} (choose other bins)")
    return [_labelled(sentences[k], "tree_depth", labels[k], depth=depths[k]) for k in keep]


def top_sequence(sentence: Sentence, source: str, relations: Collection[str] | None = None) -> tuple[str, ...]:
    """The top constituents, or their dependency analogue: the deprels (subtypes stripped) of the root and
    its dependents in surface order, the root itself written ``ROOT`` (``("nsubj", "ROOT", "obj", "punct")``).

    Args:
        relations: keep only dependents with these (stripped) relations, e.g. :data:`CORE_RELATIONS` for the
            order of the predicate's core arguments (``("nsubj", "ROOT", "obj")``); ``None`` keeps them all.
            Ignored for constituency trees.
    """
    if source == "constituency":
        return top_constituents(sentence)
    if sentence.heads is None or sentence.deprels is None:
        raise ValueError(f"sentence {sentence.id!r} needs heads and deprels for dependency top constituents")
    root = sentence.heads.index(-1)
    sequence = (
        "ROOT" if i == root else rel.split(":")[0]
        for i, (h, rel) in enumerate(zip(sentence.heads, sentence.deprels))
        if i == root or h == root
    )
    return tuple(r for r in sequence if relations is None or r == "ROOT" or r in relations)


def top_constituent_examples(
    sentences: Sequence[Sentence],
    seed: int = 0,
    num_classes: int = 20,
    classes: Sequence[str] | None = None,
    source: str = "auto",
    max_per_class: int | None = None,
    relations: Collection[str] | None = None,
    balance: bool = False,
) -> list[ProbeExample]:
    """Top constituents (Conneau et al. 2018): the ``num_classes - 1`` most frequent sequences (ties broken
    alphabetically) plus ``OTHER``; labels are the sequences joined with ``" "``.

    Args:
        classes: the named classes to use (e.g. those of the train split); default: from ``sentences``.
        source: ``"dependency"``, ``"constituency"`` or ``"auto"`` (as in :func:`tree_depth_examples`).
        max_per_class: keep at most this many examples per class (seeded random subset), to curb ``OTHER``.
        relations: see :func:`top_sequence`.
        balance: downsample every class, ``OTHER`` included, to the smallest one (seeded; source order kept).

    Raises:
        ValueError: when balancing and some class has no example.
    """
    source = _resolve(sentences, source)
    sequences = [" ".join(top_sequence(s, source, relations)) for s in sentences]
    classes = top_classes(sequences, num_classes) if classes is None else classes
    named = set(classes)
    labels = [q if q in named else OTHER for q in sequences]
    keep: Sequence[int] = range(len(labels))
    if balance:
        keep = _balanced(labels, [*classes, OTHER], random.Random(seed), lambda sizes: (
            f"cannot balance top-constituent classes: no example of {[c for c, v in sizes.items() if v == 0]} "
            f"among {len(sentences)} sentences (fewer classes or more data)"), cap=max_per_class)
    elif max_per_class is not None:
        keep = _capped(labels, max_per_class, random.Random(seed))
    return [_labelled(sentences[k], "top_constituents", labels[k], sequence=sequences[k]) for k in keep]


def top_classes(sequences: Sequence[str], num_classes: int) -> list[str]:
    """The ``num_classes - 1`` most frequent sequences, by frequency (ties broken alphabetically)."""
    counts = Counter(sequences)
    return sorted(counts, key=lambda q: (-counts[q], q))[: num_classes - 1]


def majority_baseline(labels: Sequence[Hashable]) -> float:
    """Accuracy of always predicting the most frequent label."""
    if not labels:
        raise ValueError("majority_baseline: no labels")
    return Counter(labels).most_common(1)[0][1] / len(labels)


def _resolve(sentences: Sequence[Sentence], source: str) -> str:
    if source not in ("auto", "dependency", "constituency"):
        raise ValueError(f"source must be 'auto', 'dependency' or 'constituency', got {source!r}")
    if not sentences:
        raise ValueError("no sentences given")
    if source == "auto":
        return "constituency" if all(s.constituency is not None for s in sentences) else "dependency"
    return source


def _labelled(sentence: Sentence, probe: str, label: Hashable, **extra: object) -> ProbeExample:
    meta = {**sentence.meta, "source_id": sentence.id, "probe": probe, "label": label, **extra}
    return ProbeExample(replace(sentence, id=f"{sentence.id}/{probe}", meta=meta), label)


def _balanced(labels: list[Hashable], classes: Iterable[Hashable], rng: random.Random,
              cannot: Callable[[dict[Hashable, int]], str], cap: int | None = None) -> list[int]:
    """Indices of an equal-size random subset of each of ``classes`` (at most ``cap`` each); when a class has
    no example, ``ValueError(cannot(sizes per class))``."""
    counts = Counter(labels)
    sizes = {c: counts[c] for c in classes}
    if min(sizes.values()) == 0:
        raise ValueError(cannot(sizes))
    return _capped(labels, min(sizes.values()) if cap is None else min(min(sizes.values()), cap), rng)


def _capped(labels: list[Hashable], cap: int, rng: random.Random) -> list[int]:
    by_class = defaultdict(list)
    for k, y in enumerate(labels):
        by_class[y].append(k)
    keep = [k for y in sorted(by_class, key=str) for k in rng.sample(by_class[y], min(cap, len(by_class[y])))]
    return sorted(keep)
