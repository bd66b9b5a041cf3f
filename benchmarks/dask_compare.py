"""Benchmark: a 6-run comparison on a local Dask cluster against the same comparison run serially.

    python benchmarks/dask_compare.py                 # 3 settings x 2 seeds of depth tagging, 500 steps each (~5 s a run)
    python benchmarks/dask_compare.py --steps 20      # a quick smoke run

What users wait for: ``structattn compare ... --dask local:2`` against ``structattn compare ...`` on a 2-core
machine, every run with one intra-op thread (as the tests check, the tables are then byte-identical). Printed:

* the wall time of the serial sweep (one thread), of the sweep on ``local:2`` (cluster already started) and
  of starting the cluster, and the ratio ``local:2 / serial`` (goal of issue "Comparisons on a cluster":
  <= 0.6x, counting the cluster start);
* the per-run overhead of going through Dask: the same sweep on ``local:1`` (one worker, so no parallelism)
  minus the serial sweep, per run (goal: < 2 s); the worker's first-run imports and data preparation are in
  it, as a user pays them.

The machine's load (``os.getloadavg``) is printed before and after: on a shared machine the figures move with
it. Rounds alternate serial and Dask so that a busy machine slows both alike; a figure is the best round.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import torch

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, run_comparison
from structattn.experiments.executors import make_executor
from structattn.training import TrainConfig

SETTINGS = {"full": "full", "soft_bias": "soft_bias(dependency)", "hard_mask": "hard_mask(dependency, radius=2)"}


def comparison(steps: int) -> Comparison:
    """3 settings x 2 seeds of depth tagging on 200 sentences, a small encoder, ``steps`` steps each."""
    setup = Setup(EncoderConfig(d_model=32, num_layers=2, num_heads=2, ffn_dim=64, dropout=0.1),
                  TrainConfig(lr=3e-3, warmup_steps=5, max_steps=steps, batch_size=16, eval_every=max(steps // 2, 1),
                              patience=0))
    return Comparison.declare({"depth": "depth_tagging(limit=200, max_depth=4)"}, SETTINGS, [0, 1], setup)


def sweep(folder: Path, steps: int, executor=None) -> float:
    """Seconds one whole comparison takes into a fresh ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    run_comparison(comparison(steps), folder, quiet=True, plots=False, executor=executor)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="training steps per run")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (best round reported)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"load before {os.getloadavg()}")
    runs = len(comparison(args.steps).runs())
    with tempfile.TemporaryDirectory(prefix="dask-bench-") as tmp:
        root = Path(tmp)
        times: dict[str, list[float]] = {"serial": [], "local:2": [], "local:1": [], "start:2": [], "start:1": []}
        for _ in range(args.rounds):
            times["serial"].append(sweep(root / "serial", args.steps))
            for workers in (2, 1):
                start = time.perf_counter()
                with make_executor(f"local:{workers}", quiet=True) as executor:
                    times[f"start:{workers}"].append(time.perf_counter() - start)
                    times[f"local:{workers}"].append(sweep(root / f"local{workers}", args.steps, executor))
            equal = (root / "serial" / "results.csv").read_bytes() == (root / "local2" / "results.csv").read_bytes()
        best = {k: min(v) for k, v in times.items()}
    print(f"{runs} runs of {args.steps} steps, 1 thread each; best of {args.rounds} rounds (wall seconds)")
    print(f"  serial                 {best['serial']:7.2f}")
    print(f"  local:2 sweep          {best['local:2']:7.2f}   (+ {best['start:2']:.2f} to start the cluster)")
    ratio, with_start = best["local:2"] / best["serial"], (best["local:2"] + best["start:2"]) / best["serial"]
    print(f"  local:2 / serial       {ratio:7.2f}x sweep, {with_start:.2f}x with the cluster start (goal <= 0.6x)")
    overhead = (best["local:1"] - best["serial"]) / runs
    print(f"  per-run Dask overhead  {overhead:7.2f}   (local:1 sweep {best['local:1']:.2f} - serial, per run; "
          f"goal < 2 s; + {best['start:1']:.2f} to start the cluster)")
    print(f"  results.csv equal to the serial run: {equal}")
    print(f"load after {os.getloadavg()}")


if __name__ == "__main__":
    main()
