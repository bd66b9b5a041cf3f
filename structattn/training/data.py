"""Turning a task's items into encoded examples (once per dataset) and examples into batches (per step)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from structattn.encoders.batch import Batch
from structattn.encoders.vocab import Vocab
from structattn.progress import progress_bar
from structattn.tasks.base import IGNORE, Item, Label, Task
from structattn.structures.alignment import align_to_subwords
from structattn.structures.cache import StructureCache
from structattn.structures.collate import collate
from structattn.structures.providers.base import StructureProvider
from structattn.structures.sentence import Sentence
from structattn.structures.structure import Structure


@dataclass
class Example:
    """One encoded item: token ids, word of each token (subwords), label, structures over the tokens."""

    input_ids: list[int]
    word_ids: list[int | None] | None
    label: Label
    structures: dict[str, Structure]
    id: str | None = None

    def __len__(self) -> int:
        return len(self.input_ids)


def encode_items(
    items: Sequence[Item],
    task: Task,
    vocab: Vocab,
    providers: Mapping[str, StructureProvider],
    *,
    chunk: int = 128,
    quiet: bool = False,
    desc: str = "preprocess",
    cache: StructureCache | None = None,
) -> list[Example]:
    """Encode ``items``: ids, labels, and every named structure (see :func:`encode_inputs`), computed in
    length-sorted chunks (read from / written to the disk ``cache`` when one is given, e.g. filled by
    ``structattn structures cache``)."""
    labels = [task.label(x) for x in items]
    inputs = encode_inputs(items, [task.inputs(x) for x in items], vocab, providers, chunk=chunk, quiet=quiet,
                           desc=desc, cache=cache)
    return [Example(ids, wids, y, st, x.id) for (ids, wids, st), y, x in zip(inputs, labels, items)]


def encode_inputs(
    items: Sequence[Item],
    words: Sequence[Sequence[str]],
    vocab: Vocab,
    providers: Mapping[str, StructureProvider],
    *,
    chunk: int = 128,
    quiet: bool = False,
    desc: str = "preprocess",
    cache: StructureCache | None = None,
) -> list[tuple[list[int], list[int | None] | None, dict[str, Structure]]]:
    """Token ids, word of each token (``None`` for a word-level vocabulary) and structures of ``items``,
    whose ``words`` the model reads (``task.inputs(item)``); the input side of :func:`encode_items`, which
    labelled and unlabelled text (``structattn translate``) share.

    Structures are computed on the words; for a subword vocabulary they are aligned to the tokens
    (``align_to_subwords``), except position-based ones (window form), which are built on the tokens.
    """
    encoded = [vocab.encode(w) for w in words]
    order = sorted(range(len(items)), key=lambda i: len(items[i]))
    structures: list[dict[str, Structure]] = [{} for _ in items]
    chunks = [order[k:k + chunk] for k in range(0, len(order), chunk)]
    subwords = vocab.splitter is not None
    for idx in progress_bar(chunks, quiet=quiet or not providers, desc=desc, leave=False):
        for name, provider in providers.items():
            on_tokens = subwords and "band" in provider.provides  # position-based: built on the tokens
            chunk_items = [_token_sentence(items[i], encoded[i][0], vocab) if on_tokens else items[i] for i in idx]
            computed = provider.many(chunk_items) if cache is None else cache.get_or_compute(chunk_items, provider)
            for i, s in zip(idx, computed):
                structures[i][name] = align_to_subwords(s, encoded[i][1]) if subwords and not on_tokens else s
    return [(ids, wids, st) for (ids, wids), st in zip(encoded, structures)]


def _token_sentence(item: Item, ids: list[int], vocab: Vocab) -> Sentence:
    """The item's tokens as a plain sentence, for providers that read positions only."""
    return Sentence(words=[vocab.itos[t] for t in ids], id=item.id)


def make_batch(examples: Sequence[Example], output: str) -> Batch:
    """Pad examples into a :class:`Batch` (labels at word level, ``-100`` on padding).

    Shapes:
        input_ids, token_mask, word_ids (b, n); labels (b,) for ``output == "sentence"``, else (b, w).
    """
    b, n = len(examples), max(len(e) for e in examples)
    input_ids = torch.zeros(b, n, dtype=torch.long)
    token_mask = torch.zeros(b, n, dtype=torch.bool)
    subword = examples[0].word_ids is not None
    word_ids = torch.full((b, n), -1, dtype=torch.long) if subword else None
    for k, e in enumerate(examples):
        input_ids[k, : len(e)] = torch.tensor(e.input_ids)
        token_mask[k, : len(e)] = True
        if word_ids is not None:
            word_ids[k, : len(e)] = torch.tensor([-1 if w is None else w for w in e.word_ids])
    structures = {name: collate([e.structures[name] for e in examples]) for name in examples[0].structures}
    return Batch(input_ids, token_mask, structures, _labels(examples, output), word_ids, [e.id for e in examples])


def _labels(examples: Sequence[Example], output: str) -> torch.Tensor:
    if output == "sentence":
        return torch.tensor([int(e.label) for e in examples], dtype=torch.long)
    w = max(len(e.label) for e in examples)  # type: ignore[arg-type]
    labels = torch.full((len(examples), w), IGNORE, dtype=torch.long)
    for k, e in enumerate(examples):
        labels[k, : len(e.label)] = torch.tensor(e.label, dtype=torch.long)  # type: ignore[arg-type]
    return labels
