"""Optimisation settings."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from structattn.training.values import as_float, as_int


from structattn.training.precision import PRECISIONS


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
        precision: ``"fp32"`` (default), ``"bf16"`` or ``"auto"``. With bf16 the training forward passes and
            losses run under ``torch.autocast`` in bfloat16 (weights, optimiser state and gradients stay float32;
            evaluation and decoding stay float32), the optimiser is the fused AdamW where torch has one, and the
            output projection and loss skip padded target positions. ``"auto"``: bf16 where the device
            computes it natively (AMX-BF16 or AVX512-BF16 CPUs, bf16 GPUs), fp32 elsewhere
            (:mod:`structattn.training.precision`); the precision used is recorded in checkpoints and run
            records. Part of the fingerprint only when not ``"fp32"``, so earlier runs keep theirs.
        batch_tokens: ``None`` (default): batches of ``batch_size`` sentences. A number: batches of at most
            that many padded tokens instead (sentences x the longest in the batch; for translation the length
            of a pair is source + target tokens), and ``batch_size`` is not used for training batches
            (:class:`~structattn.training.batching.LengthBucketSampler`). Part of the fingerprint only when set.

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
    batch_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"training precision must be one of {list(PRECISIONS)}, got {self.precision!r}")
        for f in fields(self):  # gin hands over whatever the config wrote: check the types first
            if f.name == "precision" or (f.name == "batch_tokens" and self.batch_tokens is None):
                continue
            convert = as_int if f.type in ("int", int, "int | None") else as_float
            object.__setattr__(self, f.name, convert(f"training.{f.name}", getattr(self, f.name)))
        for name in ("max_steps", "batch_size", "eval_every", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"training {name} must be >= 1, got {getattr(self, name)}")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise ValueError(f"training batch_tokens must be >= 1 (or None: batches of batch_size), got {self.batch_tokens}")
        for name in ("lr", "weight_decay", "warmup_steps", "clip_norm", "patience"):
            if getattr(self, name) < 0:
                raise ValueError(f"training {name} must be >= 0, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["precision"] == "fp32":  # the default is left out: fingerprints of earlier runs stay as they were
            del out["precision"]
        if out["batch_tokens"] is None:  # likewise: fixed-size batches, as every earlier run had
            del out["batch_tokens"]
        return out
