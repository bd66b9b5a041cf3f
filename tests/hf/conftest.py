"""Tiny random Hugging Face encoders and an offline WordPiece tokenizer trained on the bundled treebank."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from structattn.hf.tokenizer import train_wordpiece  # noqa: E402
from structattn.structures import load_bundled  # noqa: E402
from tests.threads import one_thread  # noqa: E402,F401  (autouse fixture: one intra-op thread)

HIDDEN, LAYERS, HEADS, FFN = 32, 2, 4, 37
#: float32 equality up to rounding (torch's float32 rtol), for an attached model against the unattached one: the
#: attached layer computes attention through another kernel than the family's own, and the inputs change from
#: process to process (the trained WordPiece ids are not deterministic: huggingface/tokenizers#1794). Hidden
#: states of 1-3 differed by 1.07-1.09e-6 at one element of 2,720 in 2 of 40 runs against an absolute 1e-6 alone.
ROUNDING = {"atol": 1e-6, "rtol": 1.3e-6}


@pytest.fixture(scope="session")
def treebank():
    return load_bundled(60)


@pytest.fixture(scope="session")
def tokenizer(treebank):
    return train_wordpiece([s.words for s in treebank], vocab_size=300)


@pytest.fixture(scope="session")
def short_sentences(treebank):
    """Three sentences of pairwise-distinct lengths under 14 words (padding in every batch)."""
    picked, lengths = [], set()
    for s in treebank:
        if len(s) < 14 and len(s) not in lengths:
            picked.append(s)
            lengths.add(len(s))
        if len(picked) == 3:
            return picked
    raise AssertionError("the bundled treebank has too few short sentences")


def tiny_config(family: str, vocab_size: int, pad_token_id: int, **extra):
    """A random 2-layer, width-32, 4-head config of ``family``; dropout off unless ``extra`` says otherwise."""
    import transformers as tf

    dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    common = dict(vocab_size=vocab_size, pad_token_id=pad_token_id, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, intermediate_size=FFN, max_position_embeddings=128, **dropout)
    if family == "distilbert":
        return tf.DistilBertConfig(vocab_size=vocab_size, pad_token_id=pad_token_id, dim=HIDDEN, n_layers=LAYERS,
                                   n_heads=HEADS, hidden_dim=FFN, max_position_embeddings=128, dropout=0.0,
                                   attention_dropout=0.0, **extra)
    classes = {"bert": tf.BertConfig, "roberta": tf.RobertaConfig, "xlm-roberta": tf.XLMRobertaConfig,
               "electra": tf.ElectraConfig, "camembert": tf.CamembertConfig}
    if family == "electra":
        common["embedding_size"] = 24
    common.update(extra)
    return classes[family](**common)


FAMILIES = ["bert", "roberta", "xlm-roberta", "electra", "distilbert", "camembert"]


def tiny_model(family: str, tokenizer, seed: int = 0, head: str = "AutoModel", **extra):
    import transformers as tf

    torch.manual_seed(seed)
    config = tiny_config(family, len(tokenizer), tokenizer.pad_token_id, **extra)
    cls = getattr(tf, head)
    return (cls.from_config(config) if hasattr(cls, "from_config") else cls(config)).eval()
