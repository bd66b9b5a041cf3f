"""Benchmark: decoding speed of the translation model (structattn.seq2seq), side by side in one process.

    python benchmarks/decoding.py            # full run: d_model 256, 3 + 3 layers, batch 32, 3 rounds
    python benchmarks/decoding.py --quick    # smoke run: tiny model, batch 4, short outputs, 1 round

Two tables, each at 1 and 2 torch threads (``torch.set_num_threads`` between them, same process, same model):

1. sentences per second of greedy search and beam search (beam 5) at batch 32, sources of 20 tokens,
   every hypothesis decoded to the maximum length of 30 tokens (random weights: ``</s>`` is never the
   best token, so every method does the same number of steps); goal: beam 5 takes <= 3x greedy's time;
2. greedy search with the key/value cache (``CachedStepper``, O(t) per step) against recomputing the whole
   prefix every step (``RecomputeStepper``, O(t^2)) at target length 50; goal: cached >= 3x faster.

Each round times every method once (interleaved); a method's figure is its best round (wall clock; the
garbage collector off). Every timed output of the cached and recomputed paths is checked equal.
"""

from __future__ import annotations

import argparse
import gc
import platform
import time
from typing import Callable

import torch

from structattn.encoders import EncoderConfig
from structattn.seq2seq import (CachedStepper, RecomputeStepper, Seq2SeqOptions, beam_search, build_seq2seq,
                                greedy_search, source_batch)
from structattn.seq2seq.collate import PairExample


def make_model(d_model: int, layers: int, vocab: int) -> torch.nn.Module:
    torch.manual_seed(0)
    config = EncoderConfig(d_model=d_model, num_layers=layers, num_heads=4, ffn_dim=4 * d_model, dropout=0.0)
    return build_seq2seq(config, Seq2SeqOptions(), "full", vocab, vocab, {}, 2, 3).eval()


class NoEarlyEnd:
    """A stepper whose ``</s>`` is very unlikely (finite), so every hypothesis runs to the maximum length."""

    def __init__(self, stepper) -> None:
        self.stepper = stepper

    def step(self, last: torch.Tensor) -> torch.Tensor:
        logp = self.stepper.step(last).clone()
        logp[:, 3] = -1e4
        return logp

    def reorder(self, index: torch.Tensor) -> None:
        self.stepper.reorder(index)


def make_sources(batch: int, length: int, vocab: int) -> list[PairExample]:
    g = torch.Generator().manual_seed(1)
    return [PairExample(torch.randint(4, vocab, (length,), generator=g).tolist(), {}, [], f"s{k}") for k in range(batch)]


def best_time(fn: Callable[[], object]) -> float:
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def run_rounds(methods: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    best = {name: float("inf") for name in methods}
    for _ in range(rounds):
        for name, fn in methods.items():
            best[name] = min(best[name], best_time(fn))
    return best


@torch.no_grad()
def search_table(model, sources, max_len: int, beam: int, rounds: int) -> dict[str, float]:
    source = source_batch(sources)
    limits = [max_len] * len(sources)
    methods = {
        "greedy": lambda: greedy_search(NoEarlyEnd(CachedStepper(model, source)), 2, 3, limits),
        f"beam {beam}": lambda: beam_search(NoEarlyEnd(CachedStepper(model, source, copies=beam)), 2, 3, limits, beam, 0.6),
    }
    return run_rounds(methods, rounds)


@torch.no_grad()
def cache_table(model, sources, length: int, rounds: int) -> dict[str, float]:
    source = source_batch(sources)
    limits = [length] * len(sources)
    cached = greedy_search(NoEarlyEnd(CachedStepper(model, source)), 2, 3, limits)
    recomputed = greedy_search(NoEarlyEnd(RecomputeStepper(model, source)), 2, 3, limits)
    if cached != recomputed:
        raise AssertionError("cached and recomputed greedy outputs differ")
    methods = {"cached": lambda: greedy_search(NoEarlyEnd(CachedStepper(model, source)), 2, 3, limits),
               "recompute": lambda: greedy_search(NoEarlyEnd(RecomputeStepper(model, source)), 2, 3, limits)}
    return run_rounds(methods, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: a smoke test")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    d_model, layers, vocab, batch, src, out, long = (32, 1, 100, 4, 6, 8, 12) if args.quick else (256, 3, 8000, 32, 20, 30, 50)
    rounds = 1 if args.quick else args.rounds
    model = make_model(d_model, layers, vocab)
    sources = make_sources(batch, src, vocab)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}; d_model {d_model}, {layers} + {layers} "
          f"layers, vocab {vocab}, batch {batch}, source {src} tokens; best of {rounds} round(s), wall clock")
    for threads in args.threads:
        torch.set_num_threads(threads)
        search = search_table(model, sources, out, 5, rounds)
        cache = cache_table(model, sources, long, rounds)
        ratio, speedup = search["beam 5"] / search["greedy"], cache["recompute"] / cache["cached"]
        print(f"\n## {threads} thread(s)")
        print(f"| method (output {out} tokens) | s | sentences/s |\n|---|---:|---:|")
        for name, s in search.items():
            print(f"| {name} | {s:.3f} | {batch / s:.1f} |")
        print(f"beam 5 / greedy time: {ratio:.2f}x (goal <= 3x: {'met' if ratio <= 3 else 'NOT met'})")
        print(f"| greedy, target length {long} | s | sentences/s |\n|---|---:|---:|")
        for name, s in cache.items():
            print(f"| {name} | {s:.3f} | {batch / s:.1f} |")
        print(f"recompute / cached time: {speedup:.2f}x (goal >= 3x: {'met' if speedup >= 3 else 'NOT met'})")


if __name__ == "__main__":
    main()
