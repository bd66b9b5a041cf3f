"""Sizes and schedule of MLM pretraining; imports nothing heavy, so ``structattn pretrain --help`` is fast."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PretrainConfig:
    """Sizes and schedule of :func:`pretrain_mlm`.

    Attributes:
        layers, width, heads: BERT sizes (``intermediate_size = 4 * width``; heads default ``max(1, width // 64)``).
        max_length: longest input in tokens (raw text is truncated to it; treebank sentences longer are skipped).
        vocab_size: WordPiece vocabulary size.
        steps, batch_size, lr, warmup_steps, weight_decay: AdamW with linear warmup then linear decay.
        mlm_probability: fraction of tokens selected for prediction (80% -> [MASK], 10% random, 10% kept).
        seed: seeds the weights, the batch order and the masking.
    """

    layers: int = 4
    width: int = 256
    heads: int | None = None
    max_length: int = 128
    vocab_size: int = 8000
    steps: int = 1000
    batch_size: int = 32
    lr: float = 5e-4
    warmup_steps: int = 100
    weight_decay: float = 0.01
    mlm_probability: float = 0.15
    seed: int = 0

    def __post_init__(self) -> None:
        heads = self.heads or max(1, self.width // 64)
        if self.layers < 1 or self.width < 1 or self.width % heads or self.steps < 0 or self.batch_size < 1:
            raise ValueError(
                f"pretrain: need layers >= 1, width divisible by heads, steps >= 0, batch_size >= 1; got layers="
                f"{self.layers}, width={self.width}, heads={heads}, steps={self.steps}, batch_size={self.batch_size}"
            )
