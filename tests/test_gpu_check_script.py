"""``scripts/gpu_check.sh``'s steps on a machine without a GPU: an unknown step is refused, and the Multi30k step
(comparison (a), seed 0, ``training.precision = 'bf16'``) starts on the 100-pair fixture, is cut at its limit,
says so in ``summary.txt`` and resumes on a second call."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "multi30k_small"


def gpu_check(out: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/gpu_check.sh", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "CI": "true", **env}, timeout=180)


def test_unknown_step_is_refused(tmp_path):
    done = gpu_check(tmp_path / "out", GPU_CHECK_STEPS="tests benchmark")
    assert done.returncode == 3 and "unknown step 'benchmark' in GPU_CHECK_STEPS (tests, bench, multi30k)" in done.stderr


def test_multi30k_step_runs_in_bf16_is_cut_at_its_limit_and_resumes(tmp_path):
    out = tmp_path / "out"
    env = {"GPU_CHECK_STEPS": "multi30k", "GPU_CHECK_M30K_TIMEOUT": "15", "STRUCTATTN_MULTI30K": str(FIXTURE)}
    first = gpu_check(out, **env)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    summary = (out / "summary.txt").read_text()
    assert "steps: multi30k" in summary and "multi30k: exit 124 after" in summary, summary
    assert "training.precision = 'bf16'" in (out / "multi30k" / "config.gin").read_text()
    assert "compare.seeds = [0]" in (out / "multi30k" / "config.gin").read_text()
    second = gpu_check(out, **env)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert (out / "summary.txt").read_text().count("multi30k: exit 124 after") == 2  # resumed, not refused
