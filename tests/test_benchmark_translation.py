"""``benchmarks/translation.py --quick``: prints the machine and load, and at 1 and 2 threads its three markdown
tables (training against nn.Transformer and Marian, soft_bias(dependency) against full, beam 5 against HF generate)
with the expected rows and columns and positive ratios. Timing goals are not checked (a busy machine decides
them)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TABLES = {  # header (value and ratio columns) -> row names, in order
    "| model | target tokens/s | ours tokens/s / theirs |": ["ours (full)", "nn.Transformer", "MarianMTModel"],
    "| model | s/step | time / full's |": ["full", "soft_bias(dependency)"],
    "| model | sentences/s | ours sentences/s / theirs |": ["ours translate_examples", "MarianMTModel.generate"],
}


def _run_quick() -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "translation.py"), "--quick"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _tables(section: str) -> dict[str, list[list[str]]]:
    """Each table of ``section`` by header line: its body rows as cells."""
    lines = section.splitlines()
    out = {}
    for k, line in enumerate(lines):
        if line in TABLES:
            assert lines[k + 1] == "|---|---:|---:|", f"table {line!r}: separator {lines[k + 1]!r}"
            body = []
            for row in lines[k + 2:]:
                if not row.startswith("|"):
                    break
                body.append([cell.strip() for cell in row.strip("|").split("|")])
            out[line] = body
    return out


def test_quick_run_prints_three_tables_per_thread_count_with_positive_ratios():
    out = _run_quick()
    assert re.search(r"^machine: .+, \d+ logical CPUs", out, re.M), out[:500]
    assert "load before:" in out and "load after:" in out and "load average" in out
    sections = re.split(r"^## ", out, flags=re.M)[1:]
    assert [s.split(",")[0] for s in sections] == ["1 thread(s)", "2 thread(s)"]
    for section in sections:
        tables = _tables(section)
        assert set(tables) == set(TABLES), f"tables found: {list(tables)}"
        for header, rows in tables.items():
            assert [r[0] for r in rows] == TABLES[header], f"{header}: rows {rows}"
            for name, value, ratio in rows:
                assert float(value) > 0 and float(ratio) > 0, f"{header}: row {name!r} has {value}, {ratio}"
            assert float(rows[0][2]) == 1.0, f"{header}: the reference row's ratio is {rows[0][2]}"
        for goal in ("goal >= 1.0x", "goal <= 1.10x", "goal >= 1.5x"):
            assert re.search(re.escape(goal) + r": (met|NOT met)\)", section), f"no verdict for {goal!r}"
