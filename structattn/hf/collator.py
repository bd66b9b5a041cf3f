"""``StructureCollator``: sentences -> the tokenizer's batch plus structures aligned to its tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from structattn.hf.auto_config import base_model_type
from structattn.hf.families import position_limit
from structattn.hf.global_tokens import check_global_choice, global_token_mask, with_global_tokens
from structattn.structures.alignment import align_to_subwords
from structattn.structures.collate import collate
from structattn.structures.providers import StructureProvider, get_provider
from structattn.structures.sentence import Sentence, describe_sentence
from structattn.structures.structure import Structure


@dataclass
class Encoded:
    """A collated batch and the word of every token.

    Attributes:
        batch: ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when the tokenizer makes them) as
            tensors, plus ``structures`` (name -> batched Structure over the tokens): ready for ``model(**batch)``.
        word_ids: per sentence, the word index of each real token (``None`` for special tokens).
    """

    batch: dict[str, Any]
    word_ids: list[list[int | None]]

    def first_subtokens(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Position of each word's first token and the word mask.

        Shapes:
            returns index (b, w) long (0 on padding) and word_mask (b, w) bool, w the most words in the batch.
        """
        lengths = [1 + max((w for w in ids if w is not None), default=-1) for ids in self.word_ids]
        index = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
        for k, ids in enumerate(self.word_ids):
            for t in reversed(range(len(ids))):  # reversed: the first token of a word is written last
                if ids[t] is not None:
                    index[k, ids[t]] = t
        word_mask = torch.arange(index.shape[1])[None, :] < torch.tensor(lengths)[:, None]
        return index, word_mask

    def token_labels(self, word_labels: Sequence[Sequence[int]], ignore_index: int = -100) -> torch.Tensor:
        """Word-level labels on each word's first token, ``ignore_index`` elsewhere (later pieces, special
        tokens, padding): the ``labels`` of a transformers token-classification head.

        Args:
            word_labels: per sentence, one label per word (words cut by truncation are skipped).

        Shapes:
            returns (b, n) long, n as ``batch["input_ids"]``.

        Raises:
            ValueError: a sentence has fewer labels than words that have tokens (the sentence is named by index).
        """
        n = self.batch["input_ids"].shape[1]
        out = torch.full((len(self.word_ids), n), ignore_index, dtype=torch.long)
        for k, (ids, labels) in enumerate(zip(self.word_ids, word_labels)):
            if _num_words(ids) > len(labels):
                raise ValueError(f"sentence {k} of the batch has {_num_words(ids)} words with tokens but "
                                 f"{len(labels)} labels")
            seen: set[int] = set()
            for t, w in enumerate(ids):
                if w is not None and w not in seen:
                    seen.add(w)
                    out[k, t] = int(labels[w])
        return out


class StructureCollator:
    """Tokenize pre-split sentences and align each provider's word structure to the tokens.

    Tokenizes with ``is_split_into_words=True``, right padding to the longest sentence, no truncation; token
    ``t`` inherits the structure of its word through ``word_ids()`` and
    :func:`structattn.structures.align_to_subwords` (special tokens are real but unreachable).

    Args:
        tokenizer: a *fast* Hugging Face tokenizer (``word_ids()`` is needed) with right padding.
        providers: structure name (the name the attention plan uses) -> provider name or provider.
        max_length: longest tokenized sentence accepted. By default the least of what is known of the model:
            ``model``'s position table (:func:`~structattn.hf.families.max_tokens`), the tokenizer's
            ``model_max_length``, and the ``max_position_embeddings`` of the ``config.json`` in the folder the
            tokenizer was loaded from (so a folder whose tokenizer sets no length is still capped); none of
            these known: no limit.
        piece_distance: hops between pieces of one word (see ``align_to_subwords``).
        truncation: cut sentences longer than ``max_length`` tokens (default off: they are refused). The
            words that keep a token keep their distances in the whole sentence's structure; the cut words
            are gone (``Encoded.word_ids`` says which words remain).
        model: the model the batches are for (read for its position limit only).
        global_tokens: ``None`` (default: special tokens stay unreachable, as :func:`align_to_subwords` leaves
            them), ``"special"`` ([CLS]/[SEP], every real token without a word) or a list of vocabulary ids:
            those tokens reach and are reached by every real token at distance 1 in every word-aligned
            structure (:mod:`structattn.hf.global_tokens`), so under ``hard_mask`` [CLS] attends to the whole
            sentence. Position-based (``window``) structures are left as built (their provider has
            ``global_tokens`` of its own).

    Raises:
        ValueError: a slow tokenizer, left padding, a bad ``global_tokens``; at call time a sentence longer than
            ``max_length`` (without ``truncation``: the message names the sentence, its token count, the limit and
            where the limit comes from) or a tokenization that does not give every word a token (the message
            names the sentence and word). With no limit known (no ``model``, a tokenizer without
            ``model_max_length`` and no ``config.json`` beside it) nothing is refused for its length here: pass
            ``model`` or ``max_length`` (an attached model's forward still refuses the batch by name, see
            :mod:`structattn.hf.input_length`).
    """

    def __init__(
        self,
        tokenizer: Any,
        providers: Mapping[str, str | StructureProvider] | None = None,
        max_length: int | None = None,
        piece_distance: int = 0,
        truncation: bool = False,
        model: nn.Module | None = None,
        global_tokens: str | Sequence[int] | None = None,
    ) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(
                f"StructureCollator needs a fast tokenizer (word_ids() maps tokens to words); "
                f"{type(tokenizer).__name__} is not one (load it with use_fast=True)"
            )
        if getattr(tokenizer, "padding_side", "right") != "right":
            raise ValueError(f"StructureCollator pads structures at the end; the tokenizer pads on the {tokenizer.padding_side!r}")
        providers = {"dependency": "dependency"} if providers is None else providers
        self.tokenizer = tokenizer
        self.providers = {k: get_provider(p) if isinstance(p, str) else p for k, p in providers.items()}
        if max_length is None:
            known = known_limits(tokenizer, model)
            self.max_length, self.limit_source = min(known) if known else (None, None)
        else:  # a tokenizer's "no limit" (1e30) passed on as max_length stays no limit
            self.max_length = int(max_length) if max_length < 10**9 else None
            self.limit_source = None if self.max_length is None else f"max_length={self.max_length}"
        self.piece_distance = piece_distance
        if truncation and self.max_length is None:
            raise ValueError("StructureCollator: truncation needs a max_length (the tokenizer sets none)")
        self.truncation = truncation
        self.global_tokens = check_global_choice(global_tokens, tokenizer)

    def __call__(self, sentences: Sequence[Sentence]) -> dict[str, Any]:
        """The batch for ``model(**batch)``."""
        return self.encode(sentences).batch

    def encode(self, sentences: Sequence[Sentence]) -> Encoded:
        """The batch and each token's word (see :class:`Encoded`)."""
        if not sentences:
            raise ValueError("StructureCollator: empty list of sentences")
        enc = self.tokenizer([list(s.words) for s in sentences], is_split_into_words=True, padding=True,
                             truncation=self.truncation, max_length=self.max_length if self.truncation else None,
                             return_tensors="pt", verbose=False)
        lengths = enc["attention_mask"].sum(-1).tolist()
        word_ids = [enc.word_ids(k)[: lengths[k]] for k in range(len(sentences))]
        remedy = (f"split or drop it, or pass truncation=True to StructureCollator to keep its first {self.max_length} "
                  "tokens (max_length sets the cut; the words cut off leave the structure)")
        for s, ids in zip(sentences, word_ids):
            kept = s.words[: _num_words(ids)] if self.truncation else s.words
            check_tokenization(kept, ids, describe_sentence(s.id), self.max_length, source=self.limit_source,
                               remedy=remedy)
        batch: dict[str, Any] = dict(enc)
        tokens = [self.tokenizer.convert_ids_to_tokens(enc["input_ids"][k, : lengths[k]].tolist()) for k in range(len(sentences))]
        batch["structures"] = {name: self._aligned(p, sentences, word_ids, tokens, enc["input_ids"].shape[1])
                               for name, p in self.providers.items()}
        if self.global_tokens is not None:
            is_global = global_token_mask(self.global_tokens, enc["input_ids"], enc["attention_mask"], word_ids)
            batch["structures"] = {name: s if "band" in self.providers[name].provides else with_global_tokens(s, is_global)
                                   for name, s in batch["structures"].items()}
        return Encoded(batch, word_ids)

    def _aligned(
        self, provider: StructureProvider, sentences: Sequence[Sentence], word_ids: list[list[int | None]],
        tokens: list[list[str]], n: int,
    ) -> Structure:
        """Word structures aligned to the tokens; a position-based one (``band``: ``window``) is built on the
        tokens themselves, special tokens included (so ``global_tokens=[0]`` makes [CLS] global)."""
        if "band" in provider.provides:
            aligned = [provider(Sentence(words=t, id=s.id)) for s, t in zip(sentences, tokens)]
        else:
            aligned = [align_to_subwords(_first_words(provider(s), _num_words(ids)), ids, self.piece_distance)
                       for s, ids in zip(sentences, word_ids)]
        structure = collate(aligned)
        if structure.num_tokens != n:
            raise ValueError(f"StructureCollator: structures cover {structure.num_tokens} tokens, the batch {n}")
        return structure


def default_max_length(tokenizer: Any, model: nn.Module | None = None) -> int | None:
    """The most tokens a batch may have when no ``max_length`` is given (see :class:`StructureCollator`).

    Raises:
        ValueError: the ``config.json`` beside the tokenizer is not valid JSON (named).
    """
    known = known_limits(tokenizer, model)
    return min(known)[0] if known else None


def known_limits(tokenizer: Any, model: nn.Module | None = None) -> list[tuple[int, str]]:
    """Every token limit known of ``model`` and ``tokenizer`` (see :class:`StructureCollator`'s ``max_length``),
    each with where it comes from, as error messages word it.

    Raises:
        ValueError: the ``config.json`` beside the tokenizer is not valid JSON (named).
    """
    limits = []
    if model is not None:
        limits.append((position_limit(family_config(model.config.to_dict())), "its position table"))
    own = getattr(tokenizer, "model_max_length", None)
    if own is not None and own < 10**9:
        limits.append((int(own), "the tokenizer's model_max_length"))
    folder = str(getattr(tokenizer, "name_or_path", "") or "")
    config = Path(folder) / "config.json"
    if folder and config.is_file():
        try:
            values = json.loads(config.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{config} (beside the tokenizer) is not valid JSON ({error}); the file is truncated "
                             "or damaged") from None
        if isinstance(values, dict) and "max_position_embeddings" in values:
            limits.append((position_limit(family_config(values)), f"max_position_embeddings of {str(config)!r}"))
    return limits


def family_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (a ``config.json`` as a dict) with an attached model's ``structattn_<family>`` model type read
    as the family's own, so family rules (RoBERTa's position offset) still apply."""
    return {**config, "model_type": base_model_type(str(config.get("model_type", "")))}


def _num_words(ids: Sequence[int | None]) -> int:
    """How many words (a prefix of the sentence) have tokens."""
    return 1 + max((w for w in ids if w is not None), default=-1)


def _first_words(structure: Structure, k: int) -> Structure:
    """The structure restricted to its first ``k`` words (distances stay those of the whole sentence)."""
    if k == structure.num_tokens:
        return structure
    crop = {name: None if getattr(structure, name) is None else getattr(structure, name)[:k, :k]
            for name in ("distance", "adjacency")}
    rows = {name: None if getattr(structure, name) is None else getattr(structure, name)[:k]
            for name in ("token_mask", "is_global")}
    return replace(structure, **crop, **rows)


def check_tokenization(words: Sequence[str], ids: Sequence[int | None], who: str, max_length: int | None, *,
                       source: str | None = None, remedy: str | None = None) -> None:
    """Refuse a tokenization the word structure cannot follow.

    Args:
        words: the sentence's words; ids: the word of each token (``word_ids()``, ``None`` for specials);
        who: how messages name the sentence; max_length: most tokens allowed (``None``: no limit);
        source: where ``max_length`` comes from (said in the message); remedy: what the message advises for a
            sentence over ``max_length`` (default: split or drop it).

    Raises:
        ValueError: too many tokens, a word id out of range, a word without a token, or words out of order;
            the message names the sentence and the word.
    """
    if max_length is not None and len(ids) > max_length:
        where = f" ({source})" if source else ""
        advice = remedy or "split or drop it (truncation would cut words off the structure)"
        raise ValueError(f"{who} has {len(ids)} tokens, more than the model's {max_length}{where}; {advice}")
    n = len(words)
    real = [w for w in ids if w is not None]
    bad = [w for w in real if not 0 <= w < n]
    if bad:
        raise ValueError(f"{who}: the tokenizer gave word id {bad[0]}, but the sentence has {n} words")
    missing = sorted(set(range(n)) - set(real))
    if missing:
        w = missing[0]
        raise ValueError(
            f"{who}: word {w} ({words[w]!r}) has no token after tokenization (the tokenizer drops or merges it; "
            f"{len(missing)} such word(s)); the structure would shift, so it is refused"
        )
    if real != sorted(real):
        raise ValueError(f"{who}: the tokenizer reorders words (word ids {real}); structures cannot follow")
