"""Token vocabularies: word-level, or subword with each token mapped back to its word."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

PAD, UNK = "<pad>", "<unk>"


@dataclass(frozen=True)
class ChunkSplitter:
    """Cut a word into pieces of at most ``max_chars`` characters, later pieces marked with ``##``.

    A deterministic stand-in for a trained subword tokenizer (any ``word -> list[str]`` callable with a
    ``to_dict`` works the same way); it exercises the subword path (several tokens per word, structures
    aligned to tokens) without a download.
    """

    max_chars: int = 4

    def __post_init__(self) -> None:
        if self.max_chars < 1:
            raise ValueError(f"ChunkSplitter max_chars must be >= 1, got {self.max_chars}")

    def __call__(self, word: str) -> list[str]:
        pieces = [word[k:k + self.max_chars] for k in range(0, len(word), self.max_chars)] or [word]
        return pieces[:1] + ["##" + p for p in pieces[1:]]

    def to_dict(self) -> dict[str, Any]:
        return {"max_chars": self.max_chars}


class Vocab:
    """Maps tokens to ids (0 padding, 1 unknown).

    Args:
        tokens: the known tokens, in id order after the two specials.
        lowercase: lowercase words before lookup.
        splitter: ``None`` for word-level input; otherwise splits each word into subword tokens, and
            :meth:`encode` returns which word each token belongs to.
    """

    def __init__(self, tokens: Sequence[str], lowercase: bool = True, splitter: ChunkSplitter | None = None) -> None:
        self.itos = [PAD, UNK] + [t for t in tokens if t not in (PAD, UNK)]
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.lowercase = lowercase
        self.splitter = splitter

    @classmethod
    def build(
        cls,
        sentences: Iterable[Sequence[str]],
        min_freq: int = 1,
        max_size: int | None = None,
        lowercase: bool = True,
        splitter: ChunkSplitter | None = None,
    ) -> "Vocab":
        """Tokens seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
        probe = cls([], lowercase, splitter)
        counts = Counter(t for words in sentences for w in words for t in probe.pieces(w))
        ranked = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(ranked[:max_size] if max_size else ranked, lowercase, splitter)

    def pieces(self, word: str) -> list[str]:
        """The tokens of one word."""
        word = word.lower() if self.lowercase else word
        return self.splitter(word) if self.splitter is not None else [word]

    def encode(self, words: Sequence[str]) -> tuple[list[int], list[int | None] | None]:
        """Token ids and, for subword vocabularies, the word index of every token (else ``None``)."""
        ids: list[int] = []
        word_ids: list[int | None] = []
        for k, word in enumerate(words):
            for piece in self.pieces(word):
                ids.append(self.stoi.get(piece, 1))
                word_ids.append(k)
        return ids, (word_ids if self.splitter is not None else None)

    def __len__(self) -> int:
        return len(self.itos)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (for checkpoints)."""
        splitter = None if self.splitter is None else self.splitter.to_dict()
        return {"tokens": self.itos[2:], "lowercase": self.lowercase, "splitter": splitter}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Vocab":
        splitter = None if data.get("splitter") is None else ChunkSplitter(**data["splitter"])
        return cls(data["tokens"], data["lowercase"], splitter)
