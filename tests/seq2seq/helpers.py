"""A tiny translation model and random sentence pairs for the seq2seq tests."""

from __future__ import annotations

import torch

from structattn.encoders import EncoderConfig
from structattn.seq2seq import PairExample, Seq2SeqOptions, build_seq2seq
from structattn.structures import Sentence, get_provider

BOS, EOS = 2, 3


def tiny_model(plan: str = "soft_bias(dependency)", shared: bool = False, tie: bool = True, seed: int = 0,
               source_vocab: int = 11, target_vocab: int = 13):
    torch.manual_seed(seed)
    config = EncoderConfig(d_model=15, num_layers=2, num_heads=3, ffn_dim=17, dropout=0.0)
    options = Seq2SeqOptions(shared_vocab=shared, tie_embeddings=tie)
    fields = {"dependency": get_provider("dependency").provides}
    size = target_vocab if shared else source_vocab
    return build_seq2seq(config, options, plan, size, target_vocab, fields, BOS, EOS).double().eval()


def random_pairs(count: int, seed: int = 0, source_vocab: int = 11, target_vocab: int = 13) -> list[PairExample]:
    """Sentences of distinct lengths with random trees (each word's head is an earlier word or the root)."""
    g = torch.Generator().manual_seed(seed)
    provider = get_provider("dependency")
    out = []
    for k in range(count):
        n = 3 + (2 * k) % 7
        heads = [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)]
        words = [f"w{i}" for i in range(n)]
        ids = torch.randint(4, source_vocab, (n,), generator=g).tolist()
        target = torch.randint(4, target_vocab, (2 + k % 5,), generator=g).tolist()
        structure = provider(Sentence(words=words, heads=heads, id=f"s{k}"))
        out.append(PairExample(ids, {"dependency": structure}, target, f"s{k}"))
    return out
