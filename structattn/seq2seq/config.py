"""Options of an encoder-decoder translation model beyond the encoder's sizes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Seq2SeqOptions:
    """What a translation model adds to an :class:`~structattn.encoders.EncoderConfig`.

    Args:
        decoder_layers: decoder depth (``None``: as many layers as the encoder).
        shared_vocab: one vocabulary (and one embedding) for source and target.
        tie_embeddings: the decoder's output projection is its input embedding (and, with ``shared_vocab``,
            also the encoder's: all three tied).
        label_smoothing: of the token cross-entropy (Szegedy et al., 2016; 0.1 as in Vaswani et al., 2017).
        beam: beam size of test decoding (1: greedy).
        length_penalty: GNMT's alpha (Wu et al., 2016): hypotheses are ranked by
            ``log p(y) / ((5 + |y|) / 6) ** alpha``; 0 ranks by the raw log-probability.
        max_len_a, max_len_b: a hypothesis has at most ``max_len_a * source_tokens + max_len_b`` tokens
            (end-of-sentence included).
    """

    decoder_layers: int | None = None
    shared_vocab: bool = False
    tie_embeddings: bool = True
    label_smoothing: float = 0.1
    beam: int = 5
    length_penalty: float = 0.6
    max_len_a: float = 1.5
    max_len_b: int = 10

    def __post_init__(self) -> None:
        if self.decoder_layers is not None and self.decoder_layers < 1:
            raise ValueError(f"decoder_layers must be >= 1 or None, got {self.decoder_layers}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.beam < 1:
            raise ValueError(f"beam must be >= 1, got {self.beam}")
        if self.length_penalty < 0:
            raise ValueError(f"length_penalty must be >= 0, got {self.length_penalty}")
        if self.max_len_a < 0 or self.max_len_b < 1:
            raise ValueError(f"need max_len_a >= 0 and max_len_b >= 1, got {self.max_len_a} and {self.max_len_b}")

    def max_length(self, source_tokens: int) -> int:
        """Longest hypothesis (tokens, end-of-sentence included) for a source of ``source_tokens`` tokens."""
        return int(self.max_len_a * source_tokens) + self.max_len_b

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
