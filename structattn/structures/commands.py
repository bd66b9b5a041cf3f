"""``structattn structures ...``: a demo on the bundled treebank and cache precomputation.

Argument parsing imports nothing heavy (torch, tqdm and the providers are imported by the subcommands).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from structattn.command_line import CommandParser, add_subcommand, apply_shared_flags, positive_int
from structattn.progress import progress_bar

DEMO_PROVIDERS: list[tuple[str, dict[str, Any]]] = [
    ("dependency", {}),
    ("semantic", {}),
    ("window", {"radius": 3, "global_tokens": (0,)}),
]


def _parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` strings to a dict; values are Python literals when they parse as one."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"provider option {pair!r} is not key=value")
        key, value = pair.split("=", 1)
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def _summary(name: str, batches: list[Any], seconds: float, sentences: int) -> dict[str, Any]:
    """Hop statistics over real off-diagonal pairs, accumulated batch by batch."""
    import torch

    tokens = pairs = unreachable = reachable = hop_sum = max_hops = 0
    for batch in batches:
        dense = batch.dense_distance()
        real = batch.token_mask[:, :, None] & batch.token_mask[:, None, :]
        off_diagonal = real & ~torch.eye(dense.shape[-1], dtype=torch.bool)
        hops = dense[off_diagonal & (dense > 0)].long()
        tokens += int(batch.token_mask.sum())
        pairs += int(off_diagonal.sum())
        unreachable += int((off_diagonal & (dense < 0)).sum())
        reachable += hops.numel()
        hop_sum += int(hops.sum())
        max_hops = max(max_hops, int(hops.max()) if hops.numel() else 0)
    return {
        "provider": name,
        "sentences": sentences,
        "tokens": tokens,
        "mean hops": f"{hop_sum / reachable:.2f}" if reachable else "-",
        "max hops": max_hops,
        "unreachable pairs %": f"{100 * unreachable / max(1, pairs):.1f}",
        "us / sentence": f"{1e6 * seconds / sentences:.0f}",
    }


def _markdown(rows: list[dict[str, Any]]) -> str:
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(r[h]) for h in header) + " |" for r in rows]
    return "\n".join(lines)


def _heatmap(sentence: Any, structures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(structures), figsize=(5 * len(structures), 4.6), constrained_layout=True)
    n = len(sentence)
    for ax, (name, st) in zip(axes, structures.items()):
        d = st.dense_distance()[0, :n, :n].float()
        d[d < 0] = float("nan")
        im = ax.imshow(d.numpy(), cmap="viridis")
        ax.set_title(f"{name}: hops (blank = unreachable)", fontsize=10)
        ax.set_xticks(range(n), sentence.words, rotation=90, fontsize=6)
        ax.set_yticks(range(n), sentence.words, fontsize=6)
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.text(0.01, 0.99, f"sentence {sentence.id}", va="top", fontsize=9)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def demo(limit: int | None, out: Path | None, quiet: bool, threads: int | None = None) -> int:
    """Structures of the bundled UD Czech PUD treebank: a summary table and (with ``out``) a heatmap. The
    timing column depends on torch's thread count: ``threads`` sets it (default: torch's own choice), and
    the table header says which was used."""
    import torch

    from structattn.structures import get_provider

    if threads is not None:
        if threads < 1:
            raise ValueError(f"--threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    from structattn.structures.readers.bundled import load_bundled

    sentences = load_bundled(limit)
    rows, first = [], {}
    for name, options in progress_bar(DEMO_PROVIDERS, quiet=quiet, desc="providers"):
        provider = get_provider(name, **options)
        first[name] = provider.batch(sentences[:1])
        provider.batch(sentences[:64])  # warm-up: torch's first sparse products take most of a second
        start = time.perf_counter()
        batches = [provider.batch(sentences[i : i + 64]) for i in range(0, len(sentences), 64)]
        seconds = time.perf_counter() - start
        rows.append(_summary(name, batches, seconds, len(sentences)))
    print(f"UD Czech PUD (bundled, CC BY-SA 3.0): {len(sentences)} sentences; timed on {torch.get_num_threads()} "
          f"torch thread(s), batches of 64")
    print(_markdown(rows))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _heatmap(sentences[0], first, out / "distances.png")
        (out / "structures.md").write_text(_markdown(rows) + "\n")
        print(f"wrote {out / 'structures.md'} and {out / 'distances.png'}")
    return 0


def precompute(input_path: Path, provider_name: str, options: dict[str, Any], cache_dir: Path, quiet: bool) -> int:
    """Fill the disk cache with the structures of every sentence in a CoNLL-U file."""
    from structattn.structures import get_provider, read_conllu
    from structattn.structures.cache import StructureCache

    if not input_path.exists():
        raise ValueError(f"input file {input_path} does not exist")
    sentences = read_conllu(input_path)
    provider = get_provider(provider_name, **options)
    cache = StructureCache(cache_dir)
    for i in progress_bar(range(0, len(sentences), 256), quiet=quiet, desc=f"{provider_name} structures"):
        cache.get_or_compute(sentences[i : i + 256], provider)
    print(f"{len(sentences)} sentences of {input_path} cached under {cache_dir} ({provider!r})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="structattn structures", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = add_subcommand(sub, "demo", help="structures of the bundled Czech PUD treebank: summary table and heatmap")
    d.add_argument("--limit", type=positive_int, default=None, help="first N sentences only (default: all 1000)")
    d.add_argument("--out", type=Path, default=None, help="folder for structures.md and distances.png")
    c = add_subcommand(sub, "cache", help="precompute the structures of a CoNLL-U file into a disk cache")
    c.add_argument("input", type=Path, help="CoNLL-U file")
    c.add_argument("--provider", default="dependency", help="provider name (default: dependency)")
    c.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="provider option, repeatable")
    c.add_argument("--cache", type=Path, required=True, help="cache folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status. Errors print one line to stderr."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) and usage errors (2): the parser has printed the message
        return int(exit_.code or 0)
    apply_shared_flags(args)
    try:
        if args.command == "demo":
            return demo(args.limit, args.out, args.quiet, args.threads)
        return precompute(args.input, args.provider, _parse_options(args.option), args.cache, args.quiet)
    except (ValueError, OSError) as err:
        print(f"structattn structures: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
