"""A tiny learnable task on random trees (not registered), encoded examples, tiny models."""

from __future__ import annotations

import random

from structattn.encoders import EncoderConfig, TaskModel, Vocab, build_encoder, make_head
from structattn.tasks.base import Task
from structattn.structures import get_provider
from structattn.training import encode_items
from tests.encoders.util import random_sentence

CONFIG = EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.1)


class ParityTask(Task):
    """Tag each word with the parity of its number (learnable from the embeddings alone)."""

    name = "parity"
    output = "token"

    def __init__(self, sizes=(48, 12, 12), seed: int = 0):
        rng = random.Random(seed)
        self._splits = {split: [random_sentence(rng.randint(3, 9), rng, sid=f"{split}{k}") for k in range(size)]
                        for split, size in zip(("train", "dev", "test"), sizes)}

    def splits(self):
        return self._splits

    def label(self, item):
        return [int(w[1:]) % 2 for w in item.words]

    @property
    def num_labels(self):
        return 2


def encoded(task: Task | None = None):
    """(task, vocab, {split: examples}) with the dependency structure."""
    task = task or ParityTask()
    vocab = Vocab.build(task.inputs(x) for x in task.splits()["train"])
    providers = {"dependency": get_provider("dependency")}
    return task, vocab, {k: encode_items(v, task, vocab, providers, quiet=True) for k, v in task.splits().items()}


def model(vocab_size: int, plan: str = "soft_bias(dependency)@0; full", config: EncoderConfig = CONFIG) -> TaskModel:
    encoder = build_encoder(config, plan, vocab_size, {"dependency": get_provider("dependency").provides})
    return TaskModel(encoder, make_head("token", config.d_model, 2))
