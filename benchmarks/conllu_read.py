"""read_conllu against plain ``conllu.parse_incr`` on the same file, side by side.

    python benchmarks/conllu_read.py                 # the bundled UD Czech PUD (1000 sentences), 7 rounds
    python benchmarks/conllu_read.py FILE.conllu     # any CoNLL-U file
    python benchmarks/conllu_read.py --quick         # 2 rounds, a smoke test

Both read the file from disk and parse every sentence: ``list(conllu.parse_incr(open(path)))`` builds the
``TokenList`` s, ``read_conllu(path)`` builds validated :class:`~structattn.structures.Sentence` s (heads
0-based, enhanced edges with empty nodes collapsed, multi-word tokens, coreference). Rounds alternate the
two (interleaved), the clock is the process's CPU time, the figure is each one's best round, and the ratio
``read_conllu / parse_incr`` is printed. Target (issue 6): <= 1.1.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import conllu

from structattn.structures import read_conllu
from structattn.structures.readers.bundled import bundled_treebank

TARGET = 1.10


def parse_incr(path: Path) -> int:
    with open(path, encoding="utf-8") as handle:
        return len(list(conllu.parse_incr(handle)))


def ours(path: Path) -> int:
    return len(read_conllu(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=None, help="CoNLL-U file (default: the bundled treebank)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="2 rounds")
    args = parser.parse_args(argv)
    path = args.path or bundled_treebank()
    rounds = 2 if args.quick else args.rounds
    methods = {"conllu.parse_incr": parse_incr, "read_conllu": ours}
    counts = {name: f(path) for name, f in methods.items()}  # warm-up (file cache, imports)
    if len(set(counts.values())) != 1:
        raise AssertionError(f"sentence counts differ: {counts}")
    best = {name: float("inf") for name in methods}
    gc.collect()
    for _ in range(rounds):
        for name, f in methods.items():
            gc.disable()
            start = time.process_time()
            f(path)
            best[name] = min(best[name], time.process_time() - start)
            gc.enable()
    ratio = best["read_conllu"] / best["conllu.parse_incr"]
    print(f"# {path.name}: {counts['read_conllu']} sentences, best of {rounds} interleaved rounds, process CPU time")
    print("| reader | ms | us / sentence |")
    print("|---|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds * 1e3:.1f} | {seconds * 1e6 / counts[name]:.0f} |")
    print(f"\nread_conllu / parse_incr = {ratio:.2f}x (target <= {TARGET:.2f}x): {'met' if ratio <= TARGET else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
