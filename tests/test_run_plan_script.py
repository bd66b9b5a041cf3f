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
# Lane a's items: the lr tuning run, 6 shards of (a), 9 of (b), 8 of (c) (soft_bias's 6, hard_mask's last 2 at 20%).
LANE_A_SHARDS = 6 + 9 + 8
STUB = """#!/usr/bin/env bash
echo "$@" >> "$CALLS"
exit "${STUB_RC:-0}"
"""


def copy_script(tmp: Path) -> None:
    """The script in a checkout of its own at ``tmp`` (it works relative to its folder's parent)."""
    (tmp / "scripts").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "scripts" / "run_plan.sh", tmp / "scripts" / "run_plan.sh")


def run_lane(tmp: Path, lane: str, stop: str = "+2 hours", rc: int = 0,
             last_start: str | None = None) -> subprocess.CompletedProcess:
    copy_script(tmp)
    stub = tmp / "bin" / "python"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{stub.parent}:{os.environ['PATH']}", "CALLS": str(tmp / "calls.txt"),
           "STRUCTATTN_MULTI30K": "/nowhere", "STUB_RC": str(rc)}
    return subprocess.run(["bash", str(tmp / "scripts" / "run_plan.sh"), lane, stop, *([last_start] if last_start else [])],
                          env=env,
                          capture_output=True, text=True, timeout=60)


def out_and_shard(call: str) -> str:
    """``runs/plan/a 3/12`` for a shard item's call, ``runs/plan/quick_fp32`` for a whole config's."""
    return call.split("--out ")[1].split()[0] + (f" {call.split('--shard ')[1].split()[0]}" if "--shard" in call else "")


def calls(tmp: Path) -> list[str]:
    return (tmp / "calls.txt").read_text().splitlines() if (tmp / "calls.txt").exists() else []


def test_a_lane_runs_its_items_in_order_and_marks_them_done(tmp_path):
    done = run_lane(tmp_path, "a")
    assert done.returncode == 0, done.stderr
    made = calls(tmp_path)
    assert len(made) == 1 + LANE_A_SHARDS
    assert made[0].startswith("-m structattn.cli compare configs/experiments/multi30k_lr_tuning.gin --out "
                              "runs/plan/tune_lr0.001 --threads 1 --quiet --time-limit ")
    assert made[0].endswith("--gin-param training.lr = 1e-3")
    assert [out_and_shard(c) for c in made[1:]] == (
        [f"runs/plan/a {k}/12" for k in (0, 1, 2, 6, 7, 8)]  # (a): full, then hard_mask, seeds 0-2
        + [f"runs/plan/b {k}/18" for k in (0, 1, 2, 9, 10, 11, 6, 7, 8)]  # (b): full at 3k, 10k, then fixed_decay 3k
        # (c): soft_bias on spaCy's trees, then on 20% wrong; then hard_mask's last two seeds on 20% wrong (balance)
        + [f"runs/plan/c {k}/12" for k in (0, 1, 2, 6, 7, 8, 10, 11)])
    assert all("--resume" not in c for c in made[1:])
    configs = {"a": "multi30k_priors", "b": "multi30k_low_resource", "c": "multi30k_parser_noise"}
    for c in made[1:]:  # every shard of a config carries the same binding: soft_bias at the rate dev picked
        item = out_and_shard(c).split()[0].rsplit("/", 1)[1]
        assert c.startswith(f"-m structattn.cli compare configs/experiments/{configs[item]}.gin ")
        assert c.split(" --reuse ")[0].endswith(
            "--gin-param compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}")
        assert ("--reuse runs/plan/b" in c) == (item == "c")  # (b)'s folder exists by then: lane a made it
    assert (tmp_path / "runs/plan/tune_lr0.001/.plan_done").exists()
    assert (tmp_path / "runs/plan/a/shard-2-of-12/.plan_done").exists()
    assert (tmp_path / "runs/plan/c/shard-8-of-12/.plan_done").exists()
    run_lane(tmp_path, "a")
    assert len(calls(tmp_path)) == len(made)  # every item done: nothing runs again


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


def test_an_unknown_lane_is_refused(tmp_path):
    refused = run_lane(tmp_path, "x")
    assert refused.returncode == 2 and "no lane 'x' (a or b)" in refused.stderr and calls(tmp_path) == []


def test_the_two_lanes_run_every_shard_of_the_plans_configs_once(tmp_path):
    made = []
    for lane in ("a", "b"):
        assert run_lane(tmp_path / lane, lane).returncode == 0
        made += [out_and_shard(c) for c in calls(tmp_path / lane) if "--shard" in c]
    assert sorted(made) == sorted([f"runs/plan/a {k}/12" for k in range(12)] + [f"runs/plan/b {k}/18" for k in range(18)]
                                  + [f"runs/plan/c {k}/12" for k in range(12)])


def test_lane_b_runs_the_precision_check_after_its_first_29k_run(tmp_path):
    done = run_lane(tmp_path, "b")
    assert done.returncode == 0, done.stderr
    made = calls(tmp_path)
    assert [out_and_shard(c) for c in made] == (
        ["runs/plan/tune_lr0.002", "runs/plan/a 3/12", "runs/plan/quick_fp32", "runs/plan/quick_bf16"]
        + [f"runs/plan/a {k}/12" for k in (4, 5, 9, 10, 11)]  # (a): soft_bias seeds 1-2, then ssan
        + [f"runs/plan/b {k}/18" for k in (3, 4, 5, 12, 13, 14, 15, 16, 17)]  # (b): soft_bias 3k, 10k; fixed 10k
        + [f"runs/plan/c {k}/12" for k in (3, 4, 5, 9)])  # (c): hard_mask on spaCy's trees, seed 0 on 20% wrong
    for call, precision in zip(made[2:4], ("fp32", "bf16")):
        assert call.startswith("-m structattn.cli compare configs/experiments/multi30k_quick.gin ")
        assert call.endswith(f"--gin-param training.precision = '{precision}'")


def test_parser_noise_items_reuse_the_low_resource_runs_that_exist(tmp_path):
    (tmp_path / "results/plan/b").mkdir(parents=True)  # kept (b) shards; runs/plan/b is made by lane a's own (b) items
    assert run_lane(tmp_path, "b").returncode == 0
    made = calls(tmp_path)
    noise = [c for c in made if "--out runs/plan/c " in c]
    assert len(noise) == 4 and all(c.endswith(" --reuse results/plan/b") for c in noise)
    assert not [c for c in made if "--reuse" in c and "--out runs/plan/c " not in c]
    (tmp_path / "runs/plan/b").mkdir(parents=True, exist_ok=True)
    for done in (tmp_path / "runs/plan/c").glob("shard-*/.plan_done"):
        done.unlink()
    assert run_lane(tmp_path, "b").returncode == 0
    again = [c for c in calls(tmp_path)[len(made):] if "--out runs/plan/c " in c]
    assert len(again) == 4 and all(c.endswith(" --reuse runs/plan/b --reuse results/plan/b") for c in again)


def run_status(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    copy_script(tmp)
    env = {k: v for k, v in os.environ.items() if k != "STRUCTATTN_MULTI30K"}  # status reads no corpus
    return subprocess.run(["bash", str(tmp / "scripts" / "run_plan.sh"), "status", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_status_says_where_each_item_stands_and_how_to_keep_a_finished_one(tmp_path):
    repo = tmp_path / "main"  # the checkout that holds the kept records; the runs train in tmp_path
    (repo / "results/plan/tune_lr0.001").mkdir(parents=True)
    (repo / "results/plan/tune_lr0.001/provenance.json").write_text("{}")
    (repo / "results/precision_quick/fp32").mkdir(parents=True)
    (repo / "results/precision_quick/fp32/provenance.json").write_text("{}")
    (tmp_path / "runs/plan/a/shard-0-of-12").mkdir(parents=True)
    (tmp_path / "runs/plan/a/shard-0-of-12/.plan_done").touch()
    run = tmp_path / "runs/plan/a/shard-1-of-12/runs/001_x_full_s1"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints/last.pt").touch()
    (run / "log.jsonl").write_text('{"step": 1000, "dev_score": 20.0, "elapsed_s": 900.0}\n'
                                '{"step": 2000, "dev_score": 30.123, "elapsed_s": 1800.5}\n')
    (run.parents[1] / "comparison.json").write_text("{}")
    (tmp_path / "runs/plan/a/shard-2-of-12/runs").mkdir(parents=True)
    (tmp_path / "runs/plan/a/shard-2-of-12/comparison.json").write_text("{}")
    done = run_status(tmp_path, str(repo))
    assert done.returncode == 0, done.stderr
    lines = {line.split("  ")[0]: line for line in done.stdout.splitlines() if line.startswith("[")}
    assert lines["[a] tune_lr0.001"].endswith(f"kept in {repo}/results/plan/tune_lr0.001")
    assert lines["[b] quick_fp32"].endswith(f"kept in {repo}/results/precision_quick/fp32")
    assert lines["[a] a 0/12"].endswith(f"finished, not kept yet: structattn keep {tmp_path}/runs/plan/a/shard-0-of-12 "
                                        f"{repo}/results/plan/a/shard-0-of-12")
    assert lines["[a] a 1/12"].endswith("started: last dev check at step 2000 (dev 30.12, 0.50 h of training); resumes from "
                                        "runs/plan/a/shard-1-of-12/runs/001_x_full_s1/checkpoints/last.pt")
    assert lines["[a] a 2/12"].endswith("started: no dev check yet; no checkpoint yet (restarts)")
    assert lines["[b] a 3/12"].endswith("not started")
    assert "lane a: 1 kept, 1 finished and not kept, 2 started, 20 not started" in done.stdout
    assert "lane b: 1 kept, 0 finished and not kept, 0 started, 21 not started" in done.stdout
    assert not (tmp_path / "calls.txt").exists() and not (repo / "runs").exists()


def test_status_in_the_checkout_itself_and_a_missing_repo(tmp_path):
    (tmp_path / "results/plan/a/shard-3-of-12").mkdir(parents=True)
    (tmp_path / "results/plan/a/shard-3-of-12/provenance.json").write_text("{}")
    here = run_status(tmp_path)
    assert here.returncode == 0 and "[b] a 3/12             kept in results/plan/a/shard-3-of-12" in here.stdout
    missing = run_status(tmp_path, str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no folder" in missing.stderr and "nowhere" in missing.stderr


def test_a_bare_clock_time_already_past_means_that_time_tomorrow(tmp_path):
    """A session started at 23:54 with a stop of 02:28 means the coming 02:28, not this morning's (which would stop
    the lane before it starts)."""
    past = subprocess.run(["date", "-d", "-2 minutes", "+%H:%M"], capture_output=True, text=True).stdout.strip()
    done = run_lane(tmp_path, "a", stop=past)
    assert done.returncode == 0, done.stderr
    assert "stops by" in done.stderr and len(calls(tmp_path)) == 1 + LANE_A_SHARDS
    left = int(calls(tmp_path)[0].split("--time-limit ")[1].split("s")[0])
    assert 23 * 3600 < left <= 24 * 3600  # about a day ahead, not 2 minutes behind


def test_an_explicit_past_stop_time_is_refused(tmp_path):
    refused = run_lane(tmp_path, "a", stop="-1 hour")
    assert refused.returncode == 2 and "is in the past" in refused.stderr and calls(tmp_path) == []


def test_a_lane_skips_items_kept_under_results_as_on_a_fresh_clone(tmp_path):
    """A new machine has no runs/ folder (no .plan_done marks) but main's kept records: they never train again."""
    for kept in ("results/plan/tune_lr0.001", "results/plan/a/shard-0-of-12"):
        (tmp_path / kept).mkdir(parents=True)
        (tmp_path / kept / "provenance.json").write_text("{}")
    done = run_lane(tmp_path, "a")
    assert done.returncode == 0, done.stderr
    assert "[a] a shard 0/12 kept in results/plan/a/shard-0-of-12" in done.stderr
    made = [out_and_shard(c) for c in calls(tmp_path)]
    assert len(made) == LANE_A_SHARDS - 1 and made[0] == "runs/plan/a 1/12"
    assert "runs/plan/tune_lr0.001" not in made


def test_after_the_last_start_time_a_lane_only_resumes_what_it_started(tmp_path):
    """The session's end work gets a quiet machine: no run begins that the stop time would cut half-way."""
    (tmp_path / "runs/plan/a/shard-0-of-12").mkdir(parents=True)
    (tmp_path / "runs/plan/a/shard-0-of-12/comparison.json").write_text("{}")  # started: it resumes
    (tmp_path / "runs/plan/tune_lr0.001").mkdir(parents=True)
    (tmp_path / "runs/plan/tune_lr0.001/.plan_done").touch()
    stopped = run_lane(tmp_path, "a", last_start="-1 minute")
    assert stopped.returncode == 3, stopped.stderr
    assert "starts no new item after" in stopped.stderr
    assert "last start time passed; a shard 1/12 not started" in stopped.stderr
    assert [out_and_shard(c) for c in calls(tmp_path)] == ["runs/plan/a 0/12"]
    assert "--resume" in calls(tmp_path)[0]
    assert (tmp_path / "runs/plan/a/shard-0-of-12/.plan_done").exists()


def test_a_last_start_time_ahead_changes_nothing_and_one_after_the_stop_is_refused(tmp_path):
    done = run_lane(tmp_path / "ahead", "a", last_start="+1 hour")
    assert done.returncode == 0, done.stderr
    assert len(calls(tmp_path / "ahead")) == 1 + LANE_A_SHARDS
    refused = run_lane(tmp_path / "after", "a", "+1 hour", last_start="+2 hours")
    assert refused.returncode == 2 and "comes after the stop time" in refused.stderr
    assert calls(tmp_path / "after") == []
