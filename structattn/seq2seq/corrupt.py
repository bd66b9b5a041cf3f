"""Trees with a controlled share of wrong heads: parser noise at a known rate."""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

from structattn.structures.sentence import Sentence, describe_sentence


def subtree(heads: Sequence[int], node: int) -> set[int]:
    """``node`` and every word below it."""
    children: dict[int, list[int]] = {}
    for i, h in enumerate(heads):
        children.setdefault(h, []).append(i)
    out, todo = set(), [node]
    while todo:
        x = todo.pop()
        out.add(x)
        todo.extend(children.get(x, []))
    return out


def corrupt_heads(sentences: Sequence[Sentence], rate: float, seed: int) -> list[Sentence]:
    """Copies of ``sentences`` in which exactly ``round(rate * N)`` of the ``N`` non-root words (over the whole
    corpus) are reattached to a random other head, so that every tree stays a tree (one root, no cycle: the
    new head lies outside the word's own subtree). The root keeps its place; each chosen word changes head
    once, so the share of changed heads is exact. Deprels are kept (they now describe the wrong arc).

    Raises:
        ValueError: ``rate`` outside [0, 1], a sentence without heads, or too few words that can move.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"corrupt_heads: rate must be in [0, 1], got {rate}")
    missing = next((s for s in sentences if s.heads is None), None)
    if missing is not None:
        raise ValueError(f"corrupt_heads: {describe_sentence(missing.id)} has no heads")
    heads = [list(s.heads) for s in sentences]
    words = [(k, i) for k, h in enumerate(heads) for i, x in enumerate(h) if x != -1]
    wanted = round(rate * len(words))
    rng = random.Random(seed)
    rng.shuffle(words)
    changed = 0
    for k, i in words:
        if changed == wanted:
            break
        options = [j for j in range(len(heads[k])) if j != heads[k][i] and j not in subtree(heads[k], i)]
        if options:
            heads[k][i] = rng.choice(options)
            changed += 1
    if changed < wanted:
        raise ValueError(f"corrupt_heads: only {changed} of the {wanted} words asked for can take another head")
    return [dataclasses.replace(s, heads=h, edges=None) for s, h in zip(sentences, heads)]
