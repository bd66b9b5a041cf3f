"""``structattn probe``: the argument parser, importing nothing heavy (so ``--help`` answers at once); the work
is :func:`structattn.experiments.probe_command.run`."""

from __future__ import annotations

import argparse
from typing import Sequence

PROBES = ("structural_distance", "structural_depth", "tree_induction")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="structattn probe", description="Structural probes and attention trees per layer "
                                "of a Hugging Face encoder or a structattn checkpoint, against a random-weight "
                                "control.")
    p.add_argument("model", help="a local HF model directory with its tokenizer, or a structattn checkpoint file "
                   "(best.pt / last.pt of train or compare)")
    p.add_argument("--treebank", required=True, help="a CoNLL-U file with gold trees (and UPOS)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--probes", default=",".join(PROBES), help=f"comma list from {','.join(PROBES)}")
    p.add_argument("--layers", default="all", help="'all', or layers like 0,2,4 or 1-3 (0 = embeddings)")
    p.add_argument("--control", action=argparse.BooleanOptionalAction, default=True,
                   help="also probe the same architecture with random weights (default on)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N sentences")
    p.add_argument("--test-fraction", type=float, default=0.25)
    p.add_argument("--epochs", type=int, default=30, help="probe training epochs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")
    p.add_argument("--quiet", action="store_true", help="no progress bars (also when $CI is set)")
    return p


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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from structattn.experiments.probe_command import run

    return run(args)
