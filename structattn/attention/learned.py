"""What a variant learned, reported in one shape (see :meth:`StructuredAttention.learned_quantities`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LearnedQuantity:
    """One reported quantity of a variant: a bias table, a scale, a sigma...

    Attributes:
        name: what it is, e.g. ``"bias"`` (a per-bucket table) or ``"sigma"``.
        values: detached float tensor ``(h or 1, K)``: one row per head (or one shared row), one column per label.
        labels: one label per column, e.g. ``["0", "1", ">=10", "unreachable"]`` or ``["sigma"]``.
        learned: ``False`` for a fixed quantity reported for comparison (not a trained parameter).
    """

    name: str
    values: torch.Tensor
    labels: list[str]
    learned: bool = True

    def __post_init__(self) -> None:
        if self.values.dim() != 2 or self.values.shape[-1] != len(self.labels):
            raise ValueError(
                f"learned quantity {self.name!r}: values must be (h or 1, K) with K = {len(self.labels)} labels "
                f"{self.labels}, got shape {tuple(self.values.shape)}"
            )
