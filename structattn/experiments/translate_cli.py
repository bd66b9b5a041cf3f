"""``structattn translate``: the argument parser, importing nothing heavy (so ``--help`` answers at once); the
work is :func:`structattn.experiments.translate_command.run`."""

from __future__ import annotations

import argparse
from typing import Sequence

from structattn.command_line import apply_shared_flags, command_parser, positive_int

DESCRIPTION = (
    'INPUT is raw text (one sentence per line) or CoNLL-U (``.conllu``, or ``--format conllu``). Raw text is '
    "tokenised and, when the model's encoder plan reads a structure, parsed with the parser recorded with the model "
    '(``meta["parser"]``, a spaCy model; ``--parser`` overrides it); a model without a recorded parser (the '
    'synthetic task: its trees are gold) reads whitespace-tokenised text when its plan needs no structure, and '
    'CoNLL-U otherwise. Translations are written one per line, in input order.'
)


def build_parser() -> argparse.ArgumentParser:
    p = command_parser("structattn translate", DESCRIPTION)
    p.add_argument("checkpoint", help="best.pt or last.pt of a translation run")
    p.add_argument("input", help="raw text (one sentence per line) or CoNLL-U")
    p.add_argument("--out", required=True, help="output file, one translation per line")
    p.add_argument("--beam", type=positive_int, default=None, help="beam size (default: the model's; 1: greedy)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="sentences per batch (default 32)")
    p.add_argument("--format", choices=("auto", "text", "conllu"), default="auto", help="input format (auto: by suffix)")
    p.add_argument("--parser", default=None, help="spaCy model parsing raw text (default: the one recorded with the model)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    apply_shared_flags(args)
    from structattn.experiments.translate_command import run

    return run(args)
