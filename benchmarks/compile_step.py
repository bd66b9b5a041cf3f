"""Benchmark: does ``torch.compile`` (inductor, CPU) speed up our bf16 training step? Eager against compiled, side
by side in one process, and where dynamo breaks the graph.

    python benchmarks/compile_step.py            # the Multi30k size (batches of 128 pairs), 1 thread
    python benchmarks/compile_step.py --quick    # tiny sizes: a smoke run (minutes, most of it compiling)
    python benchmarks/compile_step.py --explain-only   # only where dynamo breaks the graph (no compiling)

The step is the real ``Seq2SeqTrainer`` step (collate, bf16 autocast forward, label-smoothed loss with padded
target rows skipped, backward, clip, fused AdamW) of ``benchmarks/translation.py``'s model (plan ``full`` and
``--plans`` others). The compiled one replaces the model's ``loss`` (forward and loss; the backward follows through
AOTAutograd) by ``torch.compile(model.loss, dynamic=True)``; the optimizer step stays eager. Printed: the time of
the first compiled pass (compilation included), the best of interleaved rounds of eager and compiled steps (CPU
time, one warm-up each, the garbage collector off), their ratio, and ``torch._dynamo.explain``'s graph and break
counts with the most common break reasons: every break splits the step into separately compiled pieces and
leaves the work between them eager.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import translation as bench  # noqa: E402
from _timing import CLOCKS  # noqa: E402

from structattn.seq2seq import pair_batch  # noqa: E402


def graph_breaks(model: torch.nn.Module, examples: list) -> tuple[int, int, list[tuple[str, int]]]:
    """``(graphs, breaks, [(reason, count)])`` of dynamo tracing ``model.loss`` on one batch under bf16 autocast."""
    model.train()
    batch = pair_batch(examples, bench.BOS, bench.EOS)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        explained = torch._dynamo.explain(model.loss)(batch, bench.SMOOTHING, skip_padding=True)
    reasons = Counter(str(r.reason).splitlines()[0][:100] for r in explained.break_reasons)
    return explained.graph_count, explained.graph_break_count, reasons.most_common(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: a smoke test")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 3; --quick: 1)")
    parser.add_argument("--plans", nargs="+", default=["full"], help="attention plans (default: full)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--explain-only", action="store_true",
                        help="only the graph and break counts (dynamo tracing, no compilation or timing)")
    args = parser.parse_args()
    sizes = bench.QUICK if args.quick else bench.M30K
    rounds = args.rounds if args.rounds is not None else sizes.rounds
    torch.set_num_threads(args.threads)
    clock = CLOCKS["cpu" if args.threads == 1 else "wall"]
    print(f"machine: {bench.machine()}; torch {torch.__version__}; {args.threads} thread(s)")
    print(f"load before: {bench.load()}")
    batches = bench.make_batches(sizes)
    if args.explain_only:
        for plan in args.plans:
            graphs, breaks, top = graph_breaks(bench.ours(sizes, plan), batches[0])
            print(f"{plan}: {graphs} graphs, {breaks} graph breaks; " + "; ".join(f"{c} x {r}" for r, c in top))
        return
    print(f"{sizes.batches} batches of {sizes.batch} pairs, bf16, best of {rounds} round(s)\n")
    print("| plan | eager s/step | compiled s/step | eager / compiled | first compiled pass (s, wall) | graphs | breaks |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    reasons: Counter = Counter()
    for plan in args.plans:
        eager_model, compiled_model = bench.ours(sizes, plan), bench.ours(sizes, plan)
        graphs, breaks, top = graph_breaks(bench.ours(sizes, plan), batches[0])
        reasons.update(dict(top))
        compiled_model.loss = torch.compile(compiled_model.loss, dynamic=True)
        eager = bench.trainer_step(eager_model, sizes, "bf16")
        compiled = bench.trainer_step(compiled_model, sizes, "bf16")
        start = time.perf_counter()
        for b in batches:
            compiled(b)
        first = time.perf_counter() - start
        seconds = bench.best_of({"eager": bench.over(batches, eager), "compiled": bench.over(batches, compiled)},
                                rounds, clock)
        n = len(batches)
        print(f"| {plan} | {seconds['eager'] / n:.3f} | {seconds['compiled'] / n:.3f} | "
              f"{seconds['eager'] / seconds['compiled']:.2f}x | {first:.1f} | {graphs} | {breaks} |")
    print("\nmost common graph-break reasons (all plans):")
    for reason, count in reasons.most_common(5):
        print(f"- {count} x {reason}")
    print(f"\nload after: {bench.load()}")


if __name__ == "__main__":
    main()
