"""Expanding a word-level structure to subword tokens."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import torch

from structattn.structures._checks import int_option
from structattn.structures.sentence import describe_sentence
from structattn.structures.structure import Structure


def align_to_subwords(structure: Structure, word_ids: Sequence[int | None], piece_distance: int = 0) -> Structure:
    """Expand an unbatched word-level structure to subword tokens.

    ``word_ids[t]`` is the word that token ``t`` belongs to (HuggingFace ``word_ids()`` style) or ``None`` for
    a special token ([CLS], [SEP], <s>, ...). Token ``t`` inherits the distances and adjacency of its word.
    Pieces of the same word are ``piece_distance`` hops apart (default 0: they are one node of the word
    graph) and adjacent to each other. A special token is a real token (``token_mask`` True) that is
    unreachable from every other token (``distance -1``, no adjacency) and at distance 0 from itself; give it
    global reach with the ``window`` provider's ``global_tokens`` if that is wanted.

    Shapes:
        structure: ``(n_words, n_words)``; returns ``(n_tokens, n_tokens)``.

    Raises:
        ValueError: batched or window-form input, a word id outside the sentence, or a word with no token
            (segmentation mismatch: the structure must be computed on the words the model sees).
    """
    who = describe_sentence(structure.ids[0] if structure.ids else None)
    if structure.is_batched:
        raise ValueError(f"{who}: align_to_subwords takes one sentence; align each, then collate")
    if structure.window_radius is not None:
        raise ValueError(f"{who}: a window structure is position-based; build it on the subword tokens instead")
    n_words = structure.num_tokens
    real = [w for w in word_ids if w is not None]
    bad = [(t, w) for t, w in enumerate(word_ids) if w is not None and not 0 <= w < n_words]
    if bad:
        t, w = bad[0]
        raise ValueError(f"{who}: token {t} belongs to word {w}, but the sentence has {n_words} words")
    missing = sorted(set(range(n_words)) - set(real))
    if missing:
        raise ValueError(
            f"{who}: words {missing[:10]} have no subword token; the tokenizer saw different words than the "
            "structure (segmentation mismatch)"
        )
    piece_distance = int_option(piece_distance, "piece_distance", "align_to_subwords", minimum=0)
    index = torch.tensor([0 if w is None else w for w in word_ids], dtype=torch.long)
    special = torch.tensor([w is None for w in word_ids], dtype=torch.bool)
    pair_special = special[:, None] | special[None, :]
    eye = torch.eye(len(word_ids), dtype=torch.bool)
    same_word = (index[:, None] == index[None, :]) & ~pair_special
    out: dict[str, torch.Tensor | None] = {"token_mask": torch.ones(len(word_ids), dtype=torch.bool)}
    if structure.distance is not None:
        d = structure.distance[index][:, index].clone()
        d[same_word] = piece_distance
        d[pair_special] = -1
        d[eye] = 0
        out["distance"] = d
    if structure.adjacency is not None:
        a = structure.adjacency[index][:, index] & ~pair_special
        out["adjacency"] = a | eye
    out["is_global"] = None if structure.is_global is None else structure.is_global[index] & ~special
    return replace(structure, **out)
