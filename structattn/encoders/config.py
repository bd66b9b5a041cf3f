"""Encoder hyperparameters."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from structattn.encoders.positions import POSITION_KINDS


@dataclass(frozen=True)
class EncoderConfig:
    """Sizes of a Transformer encoder (``base``: 6 layers, 8 heads, d_model 512, ffn 2048, dropout 0.1).

    Args:
        d_model: model width.
        num_layers: encoder layers.
        num_heads: attention heads per layer (``d_model`` must be divisible by it).
        ffn_dim: feed-forward hidden width.
        dropout: residual, feed-forward and embedding dropout.
        positions: ``"sinusoidal"``, ``"learned"`` or ``"none"`` (structure-only).
        max_len: longest input for learned positions.
    """

    d_model: int = 512
    num_layers: int = 6
    num_heads: int = 8
    ffn_dim: int = 2048
    dropout: float = 0.1
    positions: str = "sinusoidal"
    max_len: int = 512

    def __post_init__(self) -> None:
        for name in ("d_model", "num_layers", "num_heads", "ffn_dim", "max_len"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"encoder {name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.num_heads:
            raise ValueError(f"encoder d_model {self.d_model} is not divisible by num_heads {self.num_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"encoder dropout must be in [0, 1), got {self.dropout}")
        if self.positions not in POSITION_KINDS:
            raise ValueError(f"unknown positions {self.positions!r}; known: {', '.join(POSITION_KINDS)}")

    @property
    def head_dim(self) -> int:
        """d, the width of one head."""
        return self.d_model // self.num_heads

    def to_dict(self) -> dict:
        """Plain values (for checkpoints)."""
        return asdict(self)
