"""scripts/run_plan.sh: each lane runs its items in order with compare --time-limit (a shard item with --shard),
marks a finished item done and skips it next time, resumes a started one, and stops before an item when the
stop time is near. ``python`` is replaced by a stub that records its arguments."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB = """#!/usr/bin/env bash
echo "$@" >> "$CALLS"
exit "${STUB_RC:-0}"
"""


def run_lane(tmp: Path, lane: str, stop: str = "+2 hours", rc: int = 0) -> subprocess.CompletedProcess:
    (tmp / "scripts").mkdir(exist_ok=True)
    shutil.copy(ROOT / "scripts" / "run_plan.sh", tmp / "scripts" / "run_plan.sh")
    stub = tmp / "bin" / "python"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{stub.parent}:{os.environ['PATH']}", "CALLS": str(tmp / "calls.txt"),
           "STRUCTATTN_MULTI30K": "/nowhere", "STUB_RC": str(rc)}
    return subprocess.run(["bash", str(tmp / "scripts" / "run_plan.sh"), lane, stop], env=env, capture_output=True,
                          text=True, timeout=60)


def calls(tmp: Path) -> list[str]:
    return (tmp / "calls.txt").read_text().splitlines() if (tmp / "calls.txt").exists() else []


def test_a_lane_runs_its_items_in_order_and_marks_them_done(tmp_path):
    done = run_lane(tmp_path, "a")
    assert done.returncode == 0, done.stderr
    made = calls(tmp_path)
    assert len(made) == 4
    assert made[0].startswith("-m structattn.cli compare configs/experiments/multi30k_lr_tuning.gin --out "
                              "runs/plan/tune_lr0.001 --threads 1 --quiet --time-limit ")
    assert made[0].endswith("--gin-param training.lr = 1e-3")
    assert [c.split("--shard ")[1].split()[0] for c in made[1:]] == ["0/12", "1/12", "2/12"]
    assert all("--out runs/plan/a " in c and "--resume" not in c for c in made[1:])
    assert (tmp_path / "runs/plan/tune_lr0.001/.plan_done").exists()
    assert (tmp_path / "runs/plan/a/shard-2-of-12/.plan_done").exists()
    run_lane(tmp_path, "a")
    assert len(calls(tmp_path)) == 4  # every item done: nothing runs again


def test_a_started_item_resumes_and_a_stopped_one_ends_the_lane(tmp_path):
    (tmp_path / "runs/plan/tune_lr0.002").mkdir(parents=True)
    (tmp_path / "runs/plan/tune_lr0.002/comparison.json").write_text("{}")
    stopped = run_lane(tmp_path, "b", rc=3)
    assert stopped.returncode == 3 and "tune_lr0.002 stopped (exit 3)" in stopped.stderr
    assert len(calls(tmp_path)) == 1 and "--resume" in calls(tmp_path)[0]
    assert not (tmp_path / "runs/plan/tune_lr0.002/.plan_done").exists()


def test_no_item_starts_when_the_stop_time_is_near(tmp_path):
    done = run_lane(tmp_path, "a", stop="+5 minutes")
    assert done.returncode == 3 and "stop time reached; tune_lr0.001 not started" in done.stderr
    assert calls(tmp_path) == []


def test_lane_b_runs_the_precision_check_after_its_first_29k_run(tmp_path):
    done = run_lane(tmp_path, "b")
    assert done.returncode == 0, done.stderr
    made = calls(tmp_path)
    outs = [c.split("--out ")[1].split()[0] + (f" {c.split('--shard ')[1].split()[0]}" if "--shard" in c else "")
            for c in made]
    assert outs == ["runs/plan/tune_lr0.002", "runs/plan/a 3/12", "runs/plan/quick_fp32", "runs/plan/quick_bf16",
                    "runs/plan/a 4/12", "runs/plan/a 5/12"]
    for call, precision in zip(made[2:4], ("fp32", "bf16")):
        assert call.startswith("-m structattn.cli compare configs/experiments/multi30k_quick.gin ")
        assert call.endswith(f"--gin-param training.precision = '{precision}'")
