"""Target vocabularies (with ``<s>`` and ``</s>``) and turning target ids back into text."""

from __future__ import annotations

from typing import Iterable, Sequence

from structattn.encoders.vocab import ChunkSplitter, Vocab

BOS, EOS = "<s>", "</s>"


def target_vocab(sentences: Iterable[Sequence[str]], lowercase: bool = True, splitter: ChunkSplitter | None = None,
                 min_freq: int = 1, max_size: int | None = None) -> Vocab:
    """A vocabulary whose ids 2 and 3 are ``<s>`` and ``</s>`` (0 padding, 1 unknown), then the tokens of
    ``sentences`` by frequency (for a shared vocabulary pass source and target sentences together)."""
    built = Vocab.build(sentences, min_freq=min_freq, max_size=max_size, lowercase=lowercase, splitter=splitter)
    return Vocab([BOS, EOS] + [t for t in built.itos[2:] if t not in (BOS, EOS)], lowercase, splitter)


def special_ids(vocab: Vocab) -> tuple[int, int]:
    """``(bos_id, eos_id)``; ValueError when the vocabulary lacks them."""
    if vocab.stoi.get(BOS) != 2 or vocab.stoi.get(EOS) != 3:
        raise ValueError("not a target vocabulary: ids 2 and 3 must be <s> and </s> (build it with target_vocab)")
    return 2, 3


def detokenize(ids: Sequence[int], vocab: Vocab) -> str:
    """Words of ``ids`` joined with spaces; subword pieces marked ``##`` are glued to the piece before."""
    words: list[str] = []
    for t in ids:
        piece = vocab.itos[t] if 0 <= t < len(vocab) else vocab.itos[1]
        if piece.startswith("##") and words:
            words[-1] += piece[2:]
        else:
            words.append(piece)
    return " ".join(words)


def reference_text(words: Sequence[str], vocab: Vocab) -> str:
    """The reference as the model could write it at best: words joined with spaces, lowercased like the
    vocabulary (unknown words are kept as they are)."""
    return " ".join(w.lower() if vocab.lowercase else w for w in words)
