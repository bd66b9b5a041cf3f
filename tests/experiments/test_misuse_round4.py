"""Hardening round 4, item 4: what a user gets wrong with --time-limit, --resume and the folder lock is a clear
refusal (naming the file, the record or the pid) before any training."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from structattn import cli
from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, run_comparison
from structattn.experiments.compare import FolderLock
from structattn.experiments.record_checks import stamped
from structattn.training import TrainConfig

TASK = "depth_tagging(limit=24, max_depth=3)"
SETUP = Setup(EncoderConfig(d_model=8, num_layers=1, num_heads=2, ffn_dim=8, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=1, max_steps=2, batch_size=8, eval_every=2, patience=0))
CONFIG = """
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.max_steps = 2
compare.seeds = [0]
compare.tasks = {'depth': 'depth_tagging(limit=20)'}
compare.settings = {'full': 'full'}
"""


def comparison():
    return Comparison.declare({"depth": TASK}, {"full": "full", "mask": "hard_mask(dependency)"}, [0], SETUP)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("done")
    run_comparison(comparison(), out, quiet=True, plots=False)
    return out


@pytest.fixture
def counted(trained):
    return trained  # conftest's: the run ids trained


def interrupted(finished, tmp_path, change):
    """A copy of ``finished`` whose run 1 did not finish and whose run 0 record is changed (and re-stamped)."""
    out = Path(shutil.copytree(finished, tmp_path / "copy"))
    (out / "runs" / "001_depth_mask_s0.json").unlink()
    path = out / "runs" / "000_depth_full_s0.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(stamped(record)))
    return out, path


@pytest.mark.parametrize("limit, message", [
    ("-300s", "--time-limit '-300s' is negative: the time to stop at has already passed"),
    ("0", "a time limit must be positive, got '0'"),
    ("0h0m", "a time limit must be positive"),
])
def test_a_limit_of_zero_or_in_the_past_is_refused_before_anything_is_written(tmp_path, capsys, limit, message):
    config = tmp_path / "c.gin"
    config.write_text(CONFIG)
    out = tmp_path / "out"
    assert cli.main(["compare", str(config), "--out", str(out), f"--time-limit={limit}", "--quiet"]) == 1
    assert message in capsys.readouterr().err and not out.exists()


def test_resume_refuses_kept_records_of_another_precision(finished, tmp_path, counted):
    out, path = interrupted(finished, tmp_path, lambda r: r.update(precision="bf16"))
    with pytest.raises(ValueError, match=f"--resume: {str(path)!r} trained in bf16, but this comparison's "
                                         "training.precision means fp32 here"):
        run_comparison(comparison(), out, quiet=True, plots=False, mode="resume")
    assert counted == []


def test_resume_refuses_data_that_changed_since_the_kept_runs(finished, tmp_path, counted):
    out, _ = interrupted(finished, tmp_path, lambda r: r["provenance"]["data"].update(sha256="0" * 64))
    with pytest.raises(ValueError, match=r"--resume: the data of task 'depth' changed since the runs kept in .* "
                                         r"\(sha256 0000000000000000 then, [0-9a-f]{16} now"):
        run_comparison(comparison(), out, quiet=True, plots=False, mode="resume")
    assert counted == []


def test_a_second_client_is_refused_naming_the_lock_and_its_pid(tmp_path, counted):
    out = tmp_path / "busy"
    with FolderLock(out):
        with pytest.raises(ValueError, match=f"in use by another structattn compare .*pid {os.getpid()}.*remove "
                                             f"{str(out / FolderLock.NAME)!r}"):
            run_comparison(comparison(), out, quiet=True, plots=False, time_limit=3600)
    assert counted == []


def test_a_stale_lock_of_a_dead_pid_is_taken_over_with_a_notice(tmp_path, capsys):
    out = tmp_path / "stale"
    out.mkdir()
    (out / FolderLock.NAME).write_text(json.dumps({"host": os.uname().nodename, "pid": 2**22 + 11, "since": "then"}))
    with FolderLock(out):
        pass
    assert f"taking over {str(out / FolderLock.NAME)!r}: its holder (pid {2**22 + 11}" in capsys.readouterr().err
    assert not (out / FolderLock.NAME).exists()
