"""``benchmarks/hf_attach.py --quick``: the attached-vs-plain table in fp32 and, with ``--precision bf16``, the
bf16 rows plus each attached step's fp32 / bf16 speed-up row, with positive times and ratios. Timing goals are not
checked (a busy machine decides them; the quick model has no goals)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def rows(*flags: str) -> list[list[str]]:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "hf_attach.py"), "--quick", "--threads", "1",
                           *flags], cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("| 1 |")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


@pytest.mark.parametrize("precision, kinds", [("fp32", ["fp32"]), ("bf16", ["bf16", "fp32 / bf16"])])
def test_quick_rows_per_plan_and_precision(precision, kinds):
    found = rows("--precision", precision)
    assert [(r[2], r[5]) for r in found] == [(k, plan) for plan in ("soft_bias", "hard_mask", "ssan") for k in kinds]
    for r in found:
        assert float(r[6]) > 0 and float(r[7]) > 0 and float(r[8].rstrip("x")) > 0, r
