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


def _run_quick(*flags: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "translation.py"), "--quick", *flags], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _tables(section: str, tables: dict[str, list[str]] = TABLES) -> dict[str, list[list[str]]]:
    """Each table of ``section`` by header line: its body rows as cells."""
    lines = section.splitlines()
    out = {}
    for k, line in enumerate(lines):
        if line in tables:
            assert lines[k + 1] == "|---|---:|---:|", f"table {line!r}: separator {lines[k + 1]!r}"
            body = []
            for row in lines[k + 2:]:
                if not row.startswith("|"):
                    break
                body.append([cell.strip() for cell in row.strip("|").split("|")])
            out[line] = body
    return out


def test_quick_run_prints_three_tables_per_thread_count_with_positive_ratios():
    out = _run_quick("--no-bf16")
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


BF16_TABLES = {
    "| model | target tokens/s | tokens/s / ours fp32's |": [
        "ours full, fp32", "ours full, bf16", "nn.Transformer, fp32", "nn.Transformer, bf16 autocast",
        "ours soft_bias(dependency), bf16", "ours ssan, bf16"],
    "| model | sentences/s | sentences/s / ours fp32's |": [
        "ours translate_examples, fp32", "ours translate_examples, bf16", "MarianMTModel.generate, bf16 autocast"],
}


def test_quick_bf16_tables_compare_each_step_with_our_fp32_one():
    out = _run_quick("--bf16-only", "--threads", "1")
    sections = re.split(r"^## ", out, flags=re.M)[1:]
    assert [s.split(",")[0] for s in sections] == ["bf16"] and "1 thread(s)" in sections[0]
    tables = _tables(sections[0], BF16_TABLES)
    assert set(tables) == set(BF16_TABLES), f"tables found: {list(tables)}"
    for header, rows in tables.items():
        assert [r[0] for r in rows] == BF16_TABLES[header], f"{header}: rows {rows}"
        assert all(float(value) > 0 and float(ratio) > 0 for _, value, ratio in rows), rows
        assert float(rows[0][2]) == 1.0, f"{header}: the fp32 row's ratio is {rows[0][2]}"
    for goal in ("goal >= 3.0x", "goal >= 1.2x", "goal <= 1.10x", "goal <= 1.4x", "goal >= 2.0x", "goal >= 1.5x"):
        assert re.search(re.escape(goal) + r": (met|NOT met)\)", sections[0]), f"no verdict for {goal!r}"
