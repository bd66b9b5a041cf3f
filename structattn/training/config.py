"""Optimisation settings."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from structattn.training.values import as_float, as_int


#: values of :attr:`TrainConfig.precision`
PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings.

    Args:
        lr: peak learning rate (AdamW).
        weight_decay: AdamW weight decay, applied only to weight matrices: tensors with fewer than 2
            dimensions (LayerNorm gains, biases, scales) are not decayed, nor are the parameters of a
            ``StructuredAttention`` module (its bias tables, whatever their shape) except the weights of an
            ``nn.Linear`` inside it (``ssan``'s policy projections decay like other linear weights). See
            :func:`structattn.training.param_groups.decays`.
        warmup_steps: linear warmup length, then inverse-square-root decay.
        max_steps: optimiser updates at most.
        batch_size: sentences per batch (per process when data parallel).
        clip_norm: gradient-norm clipping threshold (0: no clipping).
        eval_every: evaluate on dev (and checkpoint) every this many steps, and at the end.
        patience: stop after this many evaluations without a better dev score (0: never stop early).
        eval_batch_size: sentences per evaluation batch.
        precision: ``"fp32"`` (default) or ``"bf16"``: the training forward passes and losses run under
            ``torch.autocast`` in bfloat16 (weights, optimiser state and gradients stay float32; evaluation and
            decoding stay float32). Meant for GPUs with bf16 units; it also runs on CPUs. Recorded with the runs
            only when not ``"fp32"``, so earlier runs keep their fingerprints.

    Resuming (``Trainer.fit(resume=...)``, ``structattn train --resume``) may change only ``max_steps``,
    ``eval_every``, ``patience`` and ``eval_batch_size``; other differences from the checkpoint are refused.
    """

    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_steps: int = 1000
    batch_size: int = 32
    clip_norm: float = 1.0
    eval_every: int = 100
    patience: int = 5
    eval_batch_size: int = 64
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"training precision must be one of {list(PRECISIONS)}, got {self.precision!r}")
        for f in fields(self):  # gin hands over whatever the config wrote: check the types first
            if f.name == "precision":
                continue
            convert = as_int if f.type in ("int", int) else as_float
            object.__setattr__(self, f.name, convert(f"training.{f.name}", getattr(self, f.name)))
        for name in ("max_steps", "batch_size", "eval_every", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"training {name} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "weight_decay", "warmup_steps", "clip_norm", "patience"):
            if getattr(self, name) < 0:
                raise ValueError(f"training {name} must be >= 0, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["precision"] == "fp32":  # the default is left out: fingerprints of earlier runs stay as they were
            del out["precision"]
        return out
