"""Benchmark: a whole-model training step of the ``base`` encoder, each attention plan against the ``full`` model.

    python benchmarks/model_step.py                          # n = 128 (b = 16) and n = 1024 (b = 2), 1 and 2 threads
    python benchmarks/model_step.py --threads 1 --clock cpu  # one setting (CPU-time clock: robust on a busy machine)
    python benchmarks/model_step.py --quick                  # smoke run: a 2-layer d_model 64 model, 2 rounds

What users wait for: one optimiser update of the ``base`` encoder (6 layers, 8 heads, d_model 512, ffn 2048,
dropout 0.1) on a batch of b sentences of n tokens: embeddings, every layer, the final norm, a squared-hidden
loss, ``backward()`` and an AdamW step. Structures (one random recursive tree per sentence through the
``dependency`` provider; ``local_global``: the ``window`` provider, radius 64, first token global) are built
once beforehand, as the data pipeline does. Each plan is timed against the ``full`` model in the same process,
in interleaved rounds (full, plan, full, plan, ...); a figure is the best round and the ratio is best / best.

Goals (issue "Speed round 2"): soft_bias and hard_mask <= 1.05x full, ssan <= 1.3x full at n = 128, and
local_global <= 1.0x full from n = 1024.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable

import torch
from _timing import CLOCKS, best_pair

from structattn.encoders import EncoderConfig, build_encoder
from structattn.structures import Sentence, get_provider
from structattn.testing.inputs import random_heads

PLANS = {
    "soft_bias": "soft_bias(dependency)",
    "hard_mask": "hard_mask(dependency)",
    "ssan": "ssan",
    "local_global": "local_global(window)",
}
GOALS = {("soft_bias", 128): 1.05, ("hard_mask", 128): 1.05, ("ssan", 128): 1.3, ("local_global", 1024): 1.0}


def make_inputs(b: int, n: int, vocab: int, gen: torch.Generator):
    sentences = [Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, gen), id=f"s{k}") for k in range(b)]
    structures = {
        "dependency": get_provider("dependency").batch(sentences),
        "window": get_provider("window", radius=64, global_tokens=[0]).batch(sentences),
    }
    input_ids = torch.randint(1, vocab, (b, n), generator=gen)
    return input_ids, torch.ones(b, n, dtype=torch.bool), structures


def train_step(config: EncoderConfig, plan: str, inputs, vocab: int, seed: int) -> Callable[[], None]:
    torch.manual_seed(seed)
    fields = {"dependency": get_provider("dependency").provides, "window": get_provider("window").provides}
    encoder = build_encoder(config, plan, vocab, fields).train()
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=1e-4)
    input_ids, token_mask, structures = inputs
    names = encoder.structure_names

    def step() -> None:
        out = encoder(input_ids, token_mask, {k: v for k, v in structures.items() if k in names})
        loss = out.hidden.square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def run(threads: int, clock_name: str, quick: bool, rounds: int) -> list[dict]:
    torch.set_num_threads(threads)
    clock = CLOCKS[clock_name]
    if quick:
        config, cells = EncoderConfig(64, 2, 4, 128, 0.1), [(16, 32)]
    else:
        config, cells = EncoderConfig(512, 6, 8, 2048, 0.1), [(16, 128), (2, 1024)]
    vocab, rows = 1000, []
    for b, n in cells:
        gen = torch.Generator().manual_seed(n)
        inputs = make_inputs(b, n, vocab, gen)
        base = train_step(config, "full", inputs, vocab, seed=0)
        for name, plan in PLANS.items():
            if name != "local_global" and n > 128 and not quick:
                continue  # the long cell is for local_global only
            t_full, t_plan = best_pair(base, train_step(config, plan, inputs, vocab, seed=0), rounds, clock)
            goal = GOALS.get((name, n)) if not quick else None
            rows.append({"threads": threads, "clock": clock_name, "b": b, "n": n, "plan": name,
                         "full_ms": 1e3 * t_full, "plan_ms": 1e3 * t_plan, "ratio": t_plan / t_full, "goal": goal})
            print(_row(rows[-1]), flush=True)
    return rows


def _row(r: dict) -> str:
    verdict = "" if r["goal"] is None else (" met" if r["ratio"] <= r["goal"] else " MISSED") + f" (goal <= {r['goal']}x)"
    return (f"| {r['threads']} | {r['clock']} | {r['b']} | {r['n']} | {r['plan']} | {r['full_ms']:.1f} | "
            f"{r['plan_ms']:.1f} | {r['ratio']:.2f}x{verdict} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2], help="torch intra-op threads (default: 1 2)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default=None,
                        help="cpu (process CPU time; meaningful at 1 thread) or wall; default: cpu at 1 thread, wall at 2")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per cell (default 5)")
    parser.add_argument("--quick", action="store_true", help="smoke run on a tiny model")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, base encoder train step vs full")
    print("| threads | clock | b | n | plan | full ms | plan ms | plan / full |")
    print("|---|---|---|---|---|---|---|---|")
    for threads in args.threads:
        clock = args.clock or ("cpu" if threads == 1 else "wall")
        run(threads, clock, args.quick, 2 if args.quick else args.rounds)


if __name__ == "__main__":
    main()
