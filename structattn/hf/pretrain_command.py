"""``structattn pretrain``: MLM-pretrain a small BERT offline on raw text or a treebank.

    structattn pretrain --text FILE_OR_TREEBANK --out DIR [--plan PLAN] [--layers 4 --width 256 --steps N]

``FILE`` ending in ``.conllu`` is read as a treebank (needed with a ``--plan`` that names structures: the
structures come from its trees); any other file is raw text, one sentence per line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from structattn.command_line import apply_shared_flags, check_not_an_input, command_parser, positive_int
from structattn.progress import progress_disabled


def build_parser() -> argparse.ArgumentParser:
    defaults = _defaults()
    p = command_parser("structattn pretrain", __doc__.split("\n\n")[0])
    p.add_argument("--text", required=True, help="raw text (one sentence per line) or a .conllu treebank")
    p.add_argument("--out", required=True, help="output model directory (save_pretrained + tokenizer)")
    p.add_argument("--plan", default=None, help="attention plan to attach before training, e.g. 'soft_bias(dependency)@0-1; full'")
    p.add_argument("--limit", type=positive_int, default=None, help="use only the first N sentences")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")
    for name, value in defaults.items():
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, type=type(value) if value is not None else int, default=value, help=f"default {value}")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # before the heavy imports: --help answers at once
    apply_shared_flags(args)
    from structattn.hf.pretrain import pretrain_mlm
    from structattn.hf.pretrain_config import PretrainConfig

    out = Path(args.out)
    check_not_an_input(out, [args.text])
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise ValueError(f"{out} is not empty; pass --overwrite to write into it")
    data = _read(Path(args.text), args.limit)
    config = PretrainConfig(**{k: getattr(args, k) for k in _defaults()})
    _, _, losses = pretrain_mlm(data, out, plan=args.plan, config=config, progress=not progress_disabled(args.quiet))
    first, last = (f"{losses[0]:.3f}", f"{losses[-1]:.3f}") if losses else ("-", "-")
    print(f"pretrained {config.layers}x{config.width} BERT on {len(data)} sentences, {config.steps} steps "
          f"(loss {first} -> {last}) -> {out}")
    return 0


def _defaults() -> dict[str, object]:
    from dataclasses import fields

    from structattn.hf.pretrain_config import PretrainConfig

    return {f.name: f.default for f in fields(PretrainConfig)}


def _read(path: Path, limit: int | None) -> list:
    if not path.is_file():
        raise FileNotFoundError(f"--text {path}: no such file")
    if path.suffix == ".conllu":
        from structattn.structures.readers import read_conllu

        data = read_conllu(path)
    else:
        data = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return data[:limit] if limit is not None else data
