"""``benchmarks/compile_step.py --quick --explain-only``: dynamo traces our bf16 training step and the script
reports its graphs and breaks (compiling and timing are the benchmark's, not the suite's: minutes of CPU)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_explain_only_counts_graphs_and_breaks_for_each_plan():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compile_step.py"), "--quick", "--explain-only",
                           "--plans", "full", "soft_bias(dependency)"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("machine: ")
    for plan in ("full", "soft_bias(dependency)"):
        line = next(x for x in done.stdout.splitlines() if x.startswith(f"{plan}: "))
        graphs, breaks = map(int, re.match(rf"{re.escape(plan)}: (\d+) graphs, (\d+) graph breaks", line).groups())
        assert graphs == breaks + 1 and graphs >= 1, line
