"""``structattn probe``: the argument parser, importing nothing heavy (so ``--help`` answers at once), and the
command, which hands an HF model directory to :func:`structattn.experiments.probe_command.probe_model` and a
structattn checkpoint to :func:`structattn.experiments.probe_checkpoint.probe_checkpoint`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from structattn.command_line import apply_shared_flags, check_not_an_input, command_parser, positive_int
from structattn.experiments.probe_options import PROBES, parse_layers


def build_parser() -> argparse.ArgumentParser:
    p = command_parser("structattn probe", "Structural probes and attention trees per layer "
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
    p.add_argument("--limit", type=positive_int, default=None, help="use only the first N sentences")
    p.add_argument("--test-fraction", type=float, default=0.25)
    p.add_argument("--epochs", type=positive_int, default=30, help="the most probe training epochs: each probe stops earlier once its loss "
                   "on a dev split (10%% of the training sentences) stops improving, as in Hewitt & Manning's code")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``structattn probe``: parse (nothing heavy imported until here), apply the shared flags, run."""
    args = build_parser().parse_args(argv)
    apply_shared_flags(args)
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Probe the model named by parsed ``args`` and write the outputs."""
    out = Path(args.out)
    probe(args.model, args.treebank, out, probes=args.probes, layers=args.layers, control=args.control,
          limit=args.limit, test_fraction=args.test_fraction, epochs=args.epochs, seed=args.seed,
          overwrite=args.overwrite, quiet=args.quiet)
    print((out / "probe.md").read_text())
    print(f"wrote {out}/: probe.csv, probe.md, probe.png")
    return 0


def probe(model: str | Path, treebank: str | Path, out: str | Path, *, probes: str | Sequence[str] = PROBES,
          layers: str | Sequence[int] | None = None, control: bool = True, limit: int | None = None,
          test_fraction: float = 0.25, epochs: int = 30, seed: int = 0, overwrite: bool = False,
          quiet: bool = False) -> list[dict[str, Any]]:
    """What ``structattn probe`` does, printing nothing (``structattn.probe`` in Python): probe ``model`` (an
    HF model directory or a structattn checkpoint file) on ``treebank`` and write ``probe.csv``, ``probe.md``
    and ``probe.png`` into ``out``; returns the rows of ``probe.csv``. ``probes``: names or a comma list;
    ``layers``: ``None`` / ``"all"``, layer numbers, or the ``--layers`` syntax (``"0,2-4"``).

    Raises:
        ValueError: ``out`` is not empty and ``overwrite`` is false, ``out`` would overwrite an input, a count
            is below 1, or the model is neither an HF directory nor a checkpoint.
    """
    from structattn.experiments.probe_command import write_outputs
    from structattn.progress import progress_disabled
    from structattn.structures.readers import read_conllu

    out = Path(out)
    check_not_an_input(out, [treebank, model], written=("probe.csv", "probe.md", "probe.png"))
    for name, value in (("limit", limit), ("epochs", epochs)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ValueError(f"{out} is not empty; pass --overwrite to write into it")
    sentences = read_conllu(Path(treebank))[:limit]
    names = probes.split(",") if isinstance(probes, str) else probes
    options = dict(probes=[p.strip() for p in names if p.strip()],
                   layers=parse_layers(layers) if isinstance(layers, str) else layers,
                   test_fraction=test_fraction, epochs=epochs, seed=seed, progress=not progress_disabled(quiet))
    if Path(model).is_file():  # a structattn checkpoint (best.pt / last.pt of train or compare)
        from structattn.experiments.probe_checkpoint import probe_checkpoint

        rows = probe_checkpoint(str(model), sentences, control=control, **options)
    else:
        rows = _probe_hf_directory(str(model), sentences, control, options)
    write_outputs(rows, out)
    return rows


def _probe_hf_directory(path: str, sentences: list[Any], control: bool,
                        options: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of the HF model saved at ``path`` (and of its random control)."""
    from transformers import AutoTokenizer

    from structattn.experiments.probe_command import probe_model, random_control
    from structattn.hf.loading import from_pretrained

    if not Path(path).is_dir():
        raise ValueError(f"{path!r} is neither an HF model directory nor a structattn checkpoint file")
    model = from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    rows = probe_model(model, tokenizer, sentences, name=Path(path).name, **options)
    if control:
        rows += probe_model(random_control(model, options["seed"]), tokenizer, sentences, name="random control",
                            **options)
    return rows
