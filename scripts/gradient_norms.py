"""Gradient norms of a Multi30k translation checkpoint, by part of the model, on real pairs.

    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/gradient_norms.py runs/.../checkpoints/last.pt
    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/gradient_norms.py CHECKPOINT --pairs 128 --draws 3

A run whose gradient norm is many times ``training.clip_norm`` trains with clipping setting every update: the
clipped step is scaled by ``clip_norm / norm`` for every parameter, so a part with huge gradients (hard ssan's
straight-through estimator, an exploding embedding) freezes the rest. The training history of a run records
the median norm and clip factor of each evaluation interval (``train_grad_norm_median``,
``train_clip_factor_median``); this script says where a checkpoint's gradient sits.

It loads the checkpoint (as ``structattn translate`` does), takes the first ``--pairs`` pairs of the Multi30k
val split (sources parsed by the parser the model records, targets tokenised as the task tokenises them), and
runs ``--draws`` training-mode forward and backward passes (fresh dropout and selection noise each) at the
label smoothing the model trained with, in float32 (a bf16 run's steps differ by rounding). For each pass it prints the loss, the gradient norm of the ssan policy
projections, of the rest of the encoder and of the decoder (with the output layer), and the factor clipping at
the checkpoint's ``clip_norm`` would scale the step by; then the largest per-parameter norms of the last pass.
Nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def part_of(name: str) -> str:
    """``"policy"`` (ssan's policy projections), ``"encoder"`` or ``"decoder"`` (the rest) for a parameter name."""
    if ".policy_query." in name or ".policy_key." in name:
        return "policy"
    return "encoder" if name.startswith("encoder.") else "decoder"


def norms_by_part(model) -> dict[str, float]:
    """The gradient norm of each part (:func:`part_of`) and of the whole model (``"all"``)."""
    squares: dict[str, float] = {}
    for name, p in model.named_parameters():
        if p.grad is not None:
            squares[part_of(name)] = squares.get(part_of(name), 0.0) + float(p.grad.double().square().sum())
    squares["all"] = sum(squares.values())
    return {k: v ** 0.5 for k, v in squares.items()}


def clip_norm_of(data: dict, path: Path) -> float | None:
    """The run's ``training.clip_norm``: from the checkpoint, or for a ``best.pt`` (weights only) from the
    ``last.pt`` beside it; None when neither records it."""
    from structattn.training import load_checkpoint

    config = data.get("train_config")
    if config is None and (path.parent / "last.pt").is_file() and path.name != "last.pt":
        config = load_checkpoint(path.parent / "last.pt").get("train_config")
    return None if not config or "clip_norm" not in config else float(config["clip_norm"])


def val_batch(loaded, pairs: int):
    """The first ``pairs`` val pairs of Multi30k as a training batch of ``loaded``'s model: sources parsed by the
    parser its meta records, targets tokenised as the task tokenises them.

    Raises:
        FileNotFoundError: ``STRUCTATTN_MULTI30K`` names no Multi30k folder.
    """
    from structattn.experiments.translate_command import encode
    from structattn.seq2seq.collate import pair_batch
    from structattn.seq2seq.pud import parse_english
    from structattn.tasks.translation_multi30k import data_folder, read_split, tokenize

    src, tgt = loaded.meta.get("source_language", "en"), loaded.meta["target_language"]
    lines = read_split(data_folder(), "dev", [src, tgt])
    texts, targets = lines[src][:pairs], lines[tgt][:pairs]
    sources = parse_english(texts, [f"val-{k}" for k in range(1, len(texts) + 1)], loaded.meta["parser"])
    examples = encode(sources, loaded.source, loaded.providers)
    for example, words in zip(examples, tokenize(targets, tgt)):
        example.target_ids = loaded.target.encode(words)[0]
    return pair_batch(examples, loaded.model.bos_id, loaded.model.eos_id)


def report(model, batch, smoothing: float, clip: float, draws: int) -> None:
    """Print each draw's loss, norms by part and clip factor, then the largest per-parameter norms."""
    model.train()
    for draw in range(1, draws + 1):
        model.zero_grad(set_to_none=True)
        loss = model.loss(batch, smoothing)
        loss.backward()
        norms = norms_by_part(model)
        parts = ", ".join(f"{k} {norms[k]:.3g}" for k in ("policy", "encoder", "decoder", "all") if k in norms)
        factor = min(1.0, clip / norms["all"]) if clip > 0 and norms["all"] > 0 else 1.0
        print(f"draw {draw}: loss {loss.item():.3f}; gradient norm {parts}; clip factor {factor:.3g}")
    top = sorted(((float(p.grad.double().norm()), n) for n, p in model.named_parameters() if p.grad is not None),
                 reverse=True)[:6]
    print("largest per-parameter norms (last draw): " + "; ".join(f"{n} {g:.3g}" for g, n in top))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=Path, help="a translation checkpoint (last.pt or best.pt)")
    parser.add_argument("--pairs", type=int, default=128, help="val pairs in the batch (default 128, a training batch)")
    parser.add_argument("--draws", type=int, default=3, help="forward/backward passes (default 3)")
    parser.add_argument("--clip-norm", type=float, default=None,
                        help="the clip_norm to judge by (default: the checkpoint's, or the last.pt beside a best.pt)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed of the dropout and noise (default 0)")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.draws < 1:
        parser.error(f"--pairs and --draws must be >= 1, got {args.pairs} and {args.draws}")
    if not args.checkpoint.is_file():
        print(f"gradient_norms: {args.checkpoint} does not exist", file=sys.stderr)
        return 2
    import torch

    from structattn.experiments.translate_command import translator_from
    from structattn.seq2seq import Seq2SeqOptions
    from structattn.training import load_checkpoint

    torch.manual_seed(args.seed)
    data = load_checkpoint(args.checkpoint)
    loaded = translator_from(data, repr(str(args.checkpoint)))
    clip = args.clip_norm if args.clip_norm is not None else clip_norm_of(data, args.checkpoint)
    problem = None
    if not loaded.meta.get("target_language") or not loaded.meta.get("parser"):
        problem = f"{args.checkpoint} is not a Multi30k model (its meta records no target language and parser)"
    elif clip is None:
        problem = f"neither {args.checkpoint} nor a last.pt beside it records training.clip_norm: pass --clip-norm"
    try:
        batch = None if problem else val_batch(loaded, args.pairs)
    except FileNotFoundError as error:
        problem = str(error)
    if problem:
        print(f"gradient_norms: {problem}", file=sys.stderr)
        return 2
    smoothing = Seq2SeqOptions(**loaded.meta["seq2seq"]).label_smoothing
    print(f"{args.checkpoint} (step {(data.get('loop') or {}).get('step', '?')}), {batch.target_in.shape[0]} val "
          f"pairs, label smoothing {smoothing:g}, clip_norm {clip:g}")
    report(loaded.model, batch, smoothing, clip, args.draws)
    return 0

if __name__ == "__main__":
    sys.exit(main())
