"""Subword vocabularies trained with Hugging Face ``tokenizers`` (BPE, Sennrich et al., 2016; or unigram, Kudo,
2018) on word-tokenised training sentences, behind the interface of :class:`~structattn.encoders.Vocab`.

A :class:`SubwordVocab` *is* a :class:`Vocab` (ids 0 ``<pad>``, 1 ``<unk>``, 2 ``<s>``, 3 ``</s>``, so that
:func:`~structattn.seq2seq.vocab.special_ids` accepts it as a target vocabulary), whose ``splitter`` cuts a word
into pieces. ``encode(words)`` returns the piece ids and the word of every piece, so word-level trees reach the
pieces through :func:`~structattn.structures.alignment.align_to_subwords` (``encode_items`` does this whenever
``vocab.splitter`` is set).

Pieces are shown (``itos``, ``pieces``) the way :func:`~structattn.seq2seq.vocab.detokenize` reads them: the
first piece of a word as it is, later pieces with a ``##`` prefix. Inside the tokenizer a word is marked by a
leading ``▁`` (a ``Metaspace`` pre-tokenizer, as in SentencePiece), not by a continuation prefix: HF's BPE
trainer assigns the ids of ``##`` continuation tokens in hash-map order and so learns different merges from
run to run on ties (huggingface/tokenizers#1794), while BPE over ``▁``-marked words is deterministic. The
unigram trainer is not bit-reproducible (its piece scores differ in the last digits between runs); the
tokenizer itself is saved with :meth:`SubwordVocab.to_dict`, so a checkpoint always decodes as it was trained.

Example::

    vocab = SubwordVocab.train(train_sources + train_targets, vocab_size=8000)
    ids, word_ids = vocab.encode(["Two", "dogs", "play", "."])
    vocab.detokenize(ids)                        # ['Two', 'dogs', 'play', '.']
    same = vocab_from_dict(vocab.to_dict())      # checkpoints: also reads plain Vocab dicts
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from structattn.encoders.vocab import PAD, UNK, Vocab
from structattn.seq2seq.vocab import BOS, EOS

SPECIALS = (PAD, UNK, BOS, EOS)
MODELS = ("bpe", "unigram")
WORD_START = "\u2581"  # "▁": SentencePiece's (and tokenizers' Metaspace) mark of a word's first piece
KIND = "subword"


class SubwordSplitter:
    """``word -> pieces`` of a trained tokenizer, pieces shown with the ``##`` convention (see the module)."""

    def __init__(self, tokenizer: Any, itos: Sequence[str]) -> None:
        self.tokenizer, self.itos = tokenizer, itos

    def ids(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """Piece ids of ``words`` (already cased as the vocabulary wants) and the word of every piece."""
        if not words:
            return [], []
        encoding = self.tokenizer.encode(list(words), is_pretokenized=True, add_special_tokens=False)
        return list(encoding.ids), [int(w) for w in encoding.word_ids]

    def __call__(self, word: str) -> list[str]:
        return [self.itos[i] for i in self.ids([word])[0]]

    def to_dict(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer.to_str()}


class SubwordVocab(Vocab):
    """A trained subword vocabulary (build it with :meth:`train`; rebuild it with :func:`vocab_from_dict`).

    Args:
        tokenizer_json: the ``tokenizers.Tokenizer`` serialised with ``to_str()``; ids 0-3 must be
            ``<pad>``, ``<unk>``, ``<s>``, ``</s>``.
        lowercase: lowercase words before splitting (the tokenizer was trained on lowercased words too).
        model: ``"bpe"`` or ``"unigram"`` (recorded; the tokenizer holds the model itself).

    Raises:
        ValueError: the tokenizer's first ids are not the four specials, or two pieces would show the same.
    """

    def __init__(self, tokenizer_json: str, lowercase: bool = False, model: str = "bpe") -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(tokenizer_json)
        raw = [tokenizer.id_to_token(i) for i in range(tokenizer.get_vocab_size())]
        if tuple(raw[:4]) != SPECIALS:
            raise ValueError(f"subword tokenizer: ids 0-3 must be {list(SPECIALS)}, got {raw[:4]}")
        shown = list(SPECIALS) + [_shown(piece) for piece in raw[4:]]
        if len(set(shown)) != len(shown):
            clash = next(s for s in shown if shown.count(s) > 1)
            raise ValueError(f"subword tokenizer: two pieces show as {clash!r}; train it with SubwordVocab.train")
        super().__init__(shown[2:], lowercase, SubwordSplitter(tokenizer, shown))
        self.model = model

    @classmethod
    def train(cls, sentences: Iterable[Sequence[str]], vocab_size: int = 8000, model: str = "bpe",
              lowercase: bool = False, min_frequency: int = 2) -> SubwordVocab:
        """Train a vocabulary of (at most) ``vocab_size`` pieces, specials included, on ``sentences`` (lists of
        words; for a joint vocabulary pass the training sources and targets together, never dev or test).

        Args:
            model: ``"bpe"`` (deterministic) or ``"unigram"``.
            min_frequency: BPE merges pairs seen at least this often (unigram ignores it).
        """
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        if model not in MODELS:
            raise ValueError(f"subword model must be one of {list(MODELS)}, got {model!r}")
        if vocab_size < len(SPECIALS) + 1:
            raise ValueError(f"subword vocab_size must be > {len(SPECIALS)} (the specials), got {vocab_size}")
        texts = [" ".join(w.lower() if lowercase else w for w in words) for words in sentences]
        if not any(t.strip() for t in texts):
            raise ValueError("subword vocabulary: no words to train on")
        if model == "bpe":
            tokenizer = Tokenizer(models.BPE(unk_token=UNK))
            trainer: Any = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                               special_tokens=list(SPECIALS), show_progress=False)
        else:
            tokenizer = Tokenizer(models.Unigram())
            trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), unk_token=UNK,
                                              show_progress=False)
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.train_from_iterator(texts, trainer)
        return cls(tokenizer.to_str(), lowercase, model)

    @classmethod
    def build(cls, *args: Any, **kwargs: Any) -> Vocab:  # type: ignore[override]
        """Not for subword vocabularies: they are trained (:meth:`train`), not counted."""
        raise TypeError("SubwordVocab is trained with SubwordVocab.train(sentences, vocab_size=...), not built")

    def encode(self, words: Sequence[str]) -> tuple[list[int], list[int | None] | None]:
        """Piece ids of ``words`` and the word index of every piece.

        Shapes:
            both lists have one entry per piece; ``word_ids`` values lie in ``[0, len(words))``.
        """
        ids, word_ids = self.splitter.ids([w.lower() if self.lowercase else w for w in words])  # type: ignore[union-attr]
        return ids, list(word_ids)

    def detokenize(self, ids: Sequence[int]) -> list[str]:
        """The words of piece ``ids`` (a later piece joins the word before it); ``<pad>``, ``<s>`` and ``</s>``
        are dropped, an unknown piece reads ``<unk>``, and ids outside the vocabulary count as unknown."""
        words: list[str] = []
        for t in ids:
            if t in (0, 2, 3):
                continue
            piece = self.itos[t] if 0 <= t < len(self.itos) else UNK
            glued = piece.removeprefix("##")
            if words and (piece.startswith("##") or words[-1] == ""):  # "": a word start whose first piece is unknown
                words[-1] += glued
            else:
                words.append(glued)
        return [w for w in words if w]

    def to_dict(self) -> dict[str, Any]:
        """Plain values (for checkpoints); :func:`vocab_from_dict` reads them back."""
        return {"kind": KIND, "model": self.model, "lowercase": self.lowercase,
                "tokenizer": json.loads(self.splitter.to_dict()["tokenizer"])}  # type: ignore[union-attr]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SubwordVocab:
        if data.get("kind") != KIND:
            raise ValueError(f"not a subword vocabulary dict (kind {data.get('kind')!r}); use vocab_from_dict")
        return cls(json.dumps(data["tokenizer"], ensure_ascii=False), data["lowercase"], data["model"])


def vocab_from_dict(data: dict[str, Any]) -> Vocab:
    """A :class:`SubwordVocab` or a plain :class:`Vocab` from its ``to_dict()`` (checkpoints hold either)."""
    return SubwordVocab.from_dict(data) if data.get("kind") == KIND else Vocab.from_dict(data)


def _shown(piece: str) -> str:
    """How a tokenizer piece is shown: ``▁dog`` -> ``dog`` (starts a word), ``s`` -> ``##s`` (continues one)."""
    return piece[len(WORD_START):] if piece.startswith(WORD_START) else "##" + piece
