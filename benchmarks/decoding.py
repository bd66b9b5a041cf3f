"""Benchmark: decoding speed of the translation model (structattn.seq2seq), side by side in one process.

    python benchmarks/decoding.py                          # full run: d_model 256, 3 + 3 layers, batch 32, 3 rounds
    python benchmarks/decoding.py --threads 1 --clock cpu  # one setting (CPU-time clock: robust on a busy machine)
    python benchmarks/decoding.py --quick                  # smoke run: tiny model, batch 4, short outputs, 1 round

Two tables, each at 1 and 2 torch threads (``torch.set_num_threads`` between them, same process, same model):

1. sentences per second of greedy search and beam search (beam 5) at batch 32, sources of 20 tokens,
   every hypothesis decoded to the maximum length of 30 tokens (random weights: ``</s>`` is never the
   best token, so every method does the same number of steps); goal: beam 5 takes <= 3x greedy's time;
2. greedy search with the key/value cache (``CachedStepper``, O(t) per step) against recomputing the whole
   prefix every step (``RecomputeStepper``, O(t^2)) at target length 50; goal: cached >= 3x faster.

Each pair is timed with ``_timing.best_pair``: one warm-up call of each, then interleaved rounds; a figure is
the best round (the garbage collector off). The clock is CPU time at 1 thread and wall clock at more, unless
``--clock`` says otherwise. The outputs of the cached and recomputed paths are checked equal.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable

import torch
from _timing import CLOCKS, best_pair, without_gc

from structattn.encoders import EncoderConfig
from structattn.seq2seq import (CachedStepper, RecomputeStepper, Seq2SeqOptions, beam_search, build_seq2seq,
                                greedy_search, source_batch)
from structattn.seq2seq.collate import PairExample


def make_model(d_model: int, layers: int, vocab: int) -> torch.nn.Module:
    torch.manual_seed(0)
    config = EncoderConfig(d_model=d_model, num_layers=layers, num_heads=4, ffn_dim=4 * d_model, dropout=0.0)
    return build_seq2seq(config, Seq2SeqOptions(), "full", vocab, vocab, {}, 2, 3).eval()


class NoEarlyEnd:
    """A stepper whose ``</s>`` is very unlikely (finite), so every hypothesis runs to the maximum length.

    It edits the wrapped stepper's fresh log-probabilities in place: a copy of the (rows, V) tensor per step
    would add a cost that no real decoder has (5 MB per step for beam 5 here)."""

    def __init__(self, stepper) -> None:
        self.stepper = stepper

    def step(self, last: torch.Tensor) -> torch.Tensor:
        logp = self.stepper.step(last)
        logp[:, 3] = -1e4
        return logp

    def reorder(self, index: torch.Tensor) -> None:
        self.stepper.reorder(index)


def make_sources(batch: int, length: int, vocab: int) -> list[PairExample]:
    g = torch.Generator().manual_seed(1)
    return [PairExample(torch.randint(4, vocab, (length,), generator=g).tolist(), {}, [], f"s{k}") for k in range(batch)]


@torch.no_grad()
def search_table(model, sources, max_len: int, beam: int, rounds: int, clock: Callable[[], float]) -> dict[str, float]:
    source = source_batch(sources)
    limits = [max_len] * len(sources)
    greedy = without_gc(lambda: greedy_search(NoEarlyEnd(CachedStepper(model, source)), 2, 3, limits))
    beamed = without_gc(lambda: beam_search(NoEarlyEnd(CachedStepper(model, source, copies=beam)), 2, 3, limits, beam, 0.6))
    t_greedy, t_beam = best_pair(greedy, beamed, rounds, clock)
    return {"greedy": t_greedy, f"beam {beam}": t_beam}


@torch.no_grad()
def cache_table(model, sources, length: int, rounds: int, clock: Callable[[], float]) -> dict[str, float]:
    source = source_batch(sources)
    limits = [length] * len(sources)
    cached = greedy_search(NoEarlyEnd(CachedStepper(model, source)), 2, 3, limits)
    recomputed = greedy_search(NoEarlyEnd(RecomputeStepper(model, source)), 2, 3, limits)
    if cached != recomputed:
        raise AssertionError("cached and recomputed greedy outputs differ")
    t_cached, t_recompute = best_pair(without_gc(lambda: greedy_search(NoEarlyEnd(CachedStepper(model, source)), 2, 3, limits)),
                                      without_gc(lambda: greedy_search(NoEarlyEnd(RecomputeStepper(model, source)), 2, 3, limits)),
                                      rounds, clock)
    return {"cached": t_cached, "recompute": t_recompute}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: a smoke test")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--clock", choices=sorted(CLOCKS), default=None,
                        help="default: cpu at 1 thread (robust on a busy machine), wall at more")
    args = parser.parse_args()
    d_model, layers, vocab, batch, src, out, long = (32, 1, 100, 4, 6, 8, 12) if args.quick else (256, 3, 8000, 32, 20, 30, 50)
    rounds = 1 if args.quick else args.rounds
    model = make_model(d_model, layers, vocab)
    sources = make_sources(batch, src, vocab)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}; d_model {d_model}, {layers} + {layers} "
          f"layers, vocab {vocab}, batch {batch}, source {src} tokens; best of {rounds} round(s)")
    for threads in args.threads:
        torch.set_num_threads(threads)
        clock_name = args.clock or ("cpu" if threads == 1 else "wall")
        search = search_table(model, sources, out, 5, rounds, CLOCKS[clock_name])
        cache = cache_table(model, sources, long, rounds, CLOCKS[clock_name])
        ratio, speedup = search["beam 5"] / search["greedy"], cache["recompute"] / cache["cached"]
        print(f"\n## {threads} thread(s), {clock_name} clock")
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
