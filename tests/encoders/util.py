"""Small shared helpers for encoder / training / experiment tests: random trees, batches, tiny models."""

from __future__ import annotations

import random

import torch

from structattn.encoders import Batch, EncoderConfig, build_encoder
from structattn.structures import Sentence, get_provider

TINY = EncoderConfig(d_model=12, num_layers=2, num_heads=3, ffn_dim=20, dropout=0.0)


def random_sentence(n: int, rng: random.Random, vocab: int = 9, sid: str | None = None) -> Sentence:
    """A sentence of ``n`` words ``t0..t{vocab-1}`` over a random tree (word k's head is an earlier word)."""
    order = list(range(n))
    rng.shuffle(order)
    heads = [-1] * n
    for k in range(1, n):
        heads[order[k]] = order[rng.randrange(k)]
    return Sentence(words=[f"t{rng.randrange(vocab)}" for _ in range(n)], heads=heads, id=sid)


def make_batch(sentences: list[Sentence], names=("dependency",)) -> Batch:
    """Word-level batch: ids from the word suffix (+2), structures from the real providers."""
    b, n = len(sentences), max(len(s) for s in sentences)
    ids = torch.zeros(b, n, dtype=torch.long)
    for k, s in enumerate(sentences):
        ids[k, : len(s)] = torch.tensor([int(w[1:]) + 2 for w in s.words])
    structures = {name: get_provider(name.split(":")[0]).batch(sentences) for name in names}
    return Batch(ids, ids > 0, structures)


def tiny_encoder(plan: str, names=("dependency",), config: EncoderConfig = TINY, vocab: int = 12):
    fields = {name: get_provider(name).provides for name in names}
    return build_encoder(config, plan, vocab, fields)
