"""Profile: where one Multi30k-size training step of our seq2seq spends its time, by operator (torch.profiler).

    python benchmarks/profile_step.py                      # full and soft_bias(dependency), fp32 and bf16, 1 thread
    python benchmarks/profile_step.py --plans full --precisions bf16 --top 15
    python benchmarks/profile_step.py --quick              # smoke run: tiny sizes

The step is the real ``Seq2SeqTrainer`` step (collate, forward, label-smoothed loss, backward, clip, AdamW) on
batches of 128 pairs of 13-15 tokens (sources: bundled UD English PUD sentences with their gold trees; random ids),
d_model 256, 4 heads, FFN 1024, 3 + 3 layers, vocab 8,000: the size of ``configs/runs/multi30k.gin``. After two
warm-up steps, ``--steps`` steps are profiled; the table lists the operators with the most self CPU time and
their share of the step. The machine (CPU model) is printed first: figures from another CPU differ.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile
from translation import FULL, QUICK, Sizes, machine, make_batches, ours

from structattn.training.config import TrainConfig
from structattn.training.seq2seq import Seq2SeqTrainer

PLANS = {"full": "full", "soft_bias": "soft_bias(dependency)", "ssan": "ssan"}


def trainer(sizes: Sizes, plan: str, precision: str, **extra) -> Seq2SeqTrainer:
    config = TrainConfig(lr=1e-4, warmup_steps=100, batch_size=sizes.batch, clip_norm=1.0, precision=precision, **extra)
    return Seq2SeqTrainer(ours(sizes, PLANS[plan]), config, label_smoothing=0.1, quiet=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plans", nargs="+", default=["full", "soft_bias"], choices=sorted(PLANS))
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = QUICK if args.quick else Sizes(**{**FULL.__dict__, "batch": 128, "batches": 2})
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; torch {torch.__version__}; {args.threads} thread(s); batch {sizes.batch} pairs")
    batches = make_batches(sizes)
    for plan in args.plans:
        for precision in args.precisions:
            t = trainer(sizes, plan, precision)
            for b in batches:
                t._train_on(b)
            start = time.perf_counter()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for k in range(args.steps):
                    t._train_on(batches[k % len(batches)])
            per_step = (time.perf_counter() - start) / args.steps
            events = prof.key_averages()
            total = sum(e.self_cpu_time_total for e in events)
            print(f"\n### {plan}, {precision}: {per_step * 1000:.0f} ms a step (profiled)\n")
            print("| operator | self CPU ms a step | share |\n|---|---:|---:|")
            for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.top]:
                ms = e.self_cpu_time_total / 1000 / args.steps
                print(f"| `{e.key}` | {ms:.1f} | {e.self_cpu_time_total / total:.1%} |")


if __name__ == "__main__":
    main()
