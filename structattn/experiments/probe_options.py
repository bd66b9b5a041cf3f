"""Names of the probes ``structattn probe`` runs and its ``--layers`` syntax (no imports: the command's
``--help`` and the probe modules share them)."""

from __future__ import annotations

PROBES = ("structural_distance", "structural_depth", "tree_induction")


def parse_layers(text: str) -> list[int] | None:
    """``"all"`` -> ``None``; ``"0,2-4"`` -> ``[0, 2, 3, 4]``."""
    if text.strip() == "all":
        return None
    layers: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            layers.extend(range(int(first), int(last if dash else first) + 1))
        except ValueError:
            raise ValueError(f"--layers {text!r}: use 'all' or i, i-j, comma-separated") from None
    return layers
