"""Word features of the learned distance predictor: word, suffixes and shape ids, read from words alone."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch

UNK, PAD = "<unk>", "<pad>"
#: feature name -> how it is read from a word
FEATURES = ("word", "suffix2", "suffix3", "shape")


def word_features(word: str) -> tuple[str, str, str, str]:
    """The feature strings of one word: lowercased form, last 2 and 3 characters, and a coarse shape."""
    low = word.lower()
    if word.isdigit():
        shape = "digit"
    elif not any(c.isalnum() for c in word):
        shape = "punct"
    elif word[:1].isupper():
        shape = "upper" if word.isupper() and len(word) > 1 else "title"
    else:
        shape = "lower"
    return low, low[-2:], low[-3:], shape


@dataclass
class WordFeatures:
    """String -> id tables of every feature (id 0 padding, id 1 unknown), built from training words.

    Args:
        tables: one ``{string: id}`` table per name in :data:`FEATURES`.
    """

    tables: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 2) -> "WordFeatures":
        """Tables of the features seen at least ``min_freq`` times in ``sentences`` (lists of words)."""
        if min_freq < 1:
            raise ValueError(f"WordFeatures: min_freq must be >= 1, got {min_freq}")
        counts = [Counter() for _ in FEATURES]
        for words in sentences:
            for word in words:
                for counter, value in zip(counts, word_features(word)):
                    counter[value] += 1
        tables = {}
        for name, counter in zip(FEATURES, counts):
            kept = sorted(v for v, c in counter.items() if c >= min_freq)
            tables[name] = {PAD: 0, UNK: 1, **{v: k + 2 for k, v in enumerate(kept)}}
        return cls(tables)

    def sizes(self) -> dict[str, int]:
        """Number of ids of each feature."""
        return {name: len(self.tables[name]) for name in FEATURES}

    def encode(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Feature ids padded with 0, and the token mask.

        Shapes:
            returns ids (b, n, f) long with f = len(FEATURES), token_mask (b, n) bool.
        """
        n = max(len(words) for words in sentences)
        ids = torch.zeros(len(sentences), n, len(FEATURES), dtype=torch.long)
        for b, words in enumerate(sentences):
            rows = [[self.tables[name].get(v, 1) for name, v in zip(FEATURES, word_features(w))] for w in words]
            ids[b, : len(words)] = torch.tensor(rows, dtype=torch.long)
        lengths = torch.tensor([len(words) for words in sentences])
        return ids, torch.arange(n)[None, :] < lengths[:, None]
