"""``compare --time-limit`` / ``compare(time_limit=...)``: a comparison stops at a checkpoint when its time is
up, says what is left, and ``--resume`` finishes it with the results an uninterrupted run gives."""

from __future__ import annotations

import json

import pytest
import torch

from structattn import api, cli
from structattn.training import TrainConfig
from structattn.training.checkpoints import load_checkpoint, save_checkpoint
from structattn.training.deadline import TimeLimitReached, deadline, format_duration, parse_duration, past_deadline
from structattn.training.seq2seq import Seq2SeqTrainer
from tests.training.test_fast_bf16 import pairs, tiny_seq2seq

CONFIG = """
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.max_steps = 6
training.eval_every = 3
training.warmup_steps = 1
compare.seeds = [0]
compare.tasks = {'depth': 'depth_tagging(limit=20)'}
compare.settings = {'full': 'full', 'soft': 'soft_bias(dependency)'}
"""
NOW = 1e-9  # a limit that has passed by the first check


def test_durations():
    assert parse_duration("2h40m") == 9600 and parse_duration("90m") == 5400 and parse_duration("45s") == 45
    assert parse_duration("1d") == 86400 and parse_duration("1h30m15s") == 5415 and parse_duration(" 2H ") == 7200
    assert parse_duration("600") == 600 and parse_duration(1.5) == 1.5 and parse_duration("0.5h") == 1800
    for bad in ("", "2x", "h", "-5", "0", "2h-3m", True):
        with pytest.raises(ValueError, match="time limit"):
            parse_duration(bad)
    assert format_duration(9600) == "2h40m" and format_duration(45) == "45s" and format_duration(0) == "0s"


def test_deadline_is_scoped():
    assert not past_deadline()
    with deadline(NOW):
        assert past_deadline()
        with deadline(None):
            assert not past_deadline()
        assert past_deadline()
    assert not past_deadline()


def test_a_training_stopped_at_the_limit_resumes_to_the_uninterrupted_weights(tmp_path):
    config = TrainConfig(max_steps=6, eval_every=3, warmup_steps=1, batch_size=4)
    whole = Seq2SeqTrainer(tiny_seq2seq(), config, quiet=True)
    torch.manual_seed(5)
    whole.fit(pairs(), pairs(4, seed=1))
    stopped = Seq2SeqTrainer(tiny_seq2seq(), config, checkpoint_dir=tmp_path, quiet=True)
    torch.manual_seed(5)
    with deadline(NOW), pytest.raises(TimeLimitReached, match=r"time limit reached at step 1; continue from .*last.pt"):
        stopped.fit(pairs(), pairs(4, seed=1))
    assert torch.load(tmp_path / "last.pt", weights_only=False)["loop"]["step"] == 1
    resumed = Seq2SeqTrainer(tiny_seq2seq(seed=9), config, checkpoint_dir=tmp_path, quiet=True)
    result = resumed.fit(pairs(), pairs(4, seed=1), resume=tmp_path / "last.pt")
    assert result.steps == 6 and [r["step"] for r in result.history] == [3, 6]
    for a, b in zip(whole.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)


def test_compare_stops_says_what_is_left_and_resumes_to_the_same_results(tmp_path, capsys, monkeypatch):
    import structattn.training.loop as loop

    whole = api.compare(CONFIG, tmp_path / "whole", quiet=True, plots=False, threads=1)
    assert whole.left == []
    out = tmp_path / "limited"
    with monkeypatch.context() as patch:  # the hour passes during the first run's first step
        checks = []
        patch.setattr(loop, "past_deadline", lambda: checks.append(1) or len(checks) >= 1)
        patch.setattr("structattn.experiments.compare.past_deadline", lambda: bool(checks))
        stopped = api.compare(CONFIG, out, quiet=True, plots=False, threads=1, time_limit="1h")
    assert list(stopped) == [] and stopped.left == ["000_depth_full_s0", "001_depth_soft_s0"]
    line = capsys.readouterr().err
    assert "time limit 1h reached; 0 of 2 runs finished" in line
    assert "2 left: run 000_depth_full_s0 stopped at step 1 (continues from " in line
    assert "1 not started (001_depth_soft_s0)" in line and "--resume" in line
    assert not (out / "results.md").exists() and not list((out / "runs").glob("*.json"))
    assert json.loads((out / "provenance.json").read_text())["finished"] is False
    done = api.compare(CONFIG, out, quiet=True, plots=False, threads=1, mode="resume")
    assert done.left == [] and (out / "results.md").is_file()
    assert (out / "results.csv").read_text() == (tmp_path / "whole" / "results.csv").read_text()
    assert [r["history"] for r in done] == [r["history"] for r in whole]


def test_the_command_exits_3_when_runs_are_left(tmp_path, capsys):
    config = tmp_path / "c.gin"
    config.write_text(CONFIG)
    code = cli.main(["compare", str(config), "--out", str(tmp_path / "o"), "--threads", "1", "--no-plots",
                     "--time-limit", "0.000001"])
    assert code == cli.STOPPED_AT_TIME_LIMIT == 3
    assert "2 left: no run was in progress; 2 not started" in capsys.readouterr().err
    assert cli.main(["compare", str(config), "--out", str(tmp_path / "o"), "--threads", "1", "--no-plots",
                     "--resume", "--time-limit", "2h"]) == 0


def test_bad_time_limits_are_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match=r"a time limit must be a duration like '2h40m'.*got '2 hours'"):
        api.compare(CONFIG, tmp_path / "x", quiet=True, plots=False, threads=1, time_limit="2 hours")
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="serial executor only, not with DaskExecutor"):
        api.compare(CONFIG, tmp_path / "y", quiet=True, plots=False, threads=1, time_limit="1h", dask="local:1")


def test_a_resumed_runs_time_counts_its_earlier_segments(tmp_path, monkeypatch):
    import structattn.training.loop as loop

    out = tmp_path / "limited"
    with monkeypatch.context() as patch:  # the hour passes during the first run's first step
        checks = []
        patch.setattr(loop, "past_deadline", lambda: checks.append(1) or True)
        patch.setattr("structattn.experiments.compare.past_deadline", lambda: bool(checks))
        api.compare(CONFIG, out, quiet=True, plots=False, threads=1, time_limit="1h")
    (last,) = out.glob("runs/000_depth_full_s0/checkpoints/last.pt")
    checkpoint = load_checkpoint(last)
    checkpoint["loop"]["elapsed_s"] = 1000.0  # as if the first segment had trained for 1,000 s before its stop
    save_checkpoint(last, **{k: v for k, v in checkpoint.items() if k not in ("format", "version", "checksum")})
    done = api.compare(CONFIG, out, quiet=True, plots=False, threads=1, mode="resume")
    resumed, fresh = done[0], done[1]  # the soft run had not started: it trains in one go
    assert resumed["provenance"]["earlier_segments_s"] == 1000.0
    assert 1000.0 < resumed["time_s"] < 1000.0 + resumed["provenance"]["wall_time_s"] + 1.0
    assert fresh["provenance"]["earlier_segments_s"] == 0.0
    assert fresh["time_s"] < 1000.0


def test_a_stopped_translation_run_is_named(tmp_path, capsys, monkeypatch):
    """The seq2seq runner names its run in the stop line (it said ``run None stopped at step 663`` and counted
    the stopped run again as not started)."""
    import structattn.training.loop as loop

    config = CONFIG.replace("compare.tasks = {'depth': 'depth_tagging(limit=20)'}",
                            "compare.tasks = {'tr': 'translation_synthetic(train=30, dev=6, test=6)'}")
    assert config != CONFIG
    checks = []
    monkeypatch.setattr(loop, "past_deadline", lambda: checks.append(1) or len(checks) >= 2)
    monkeypatch.setattr("structattn.experiments.compare.past_deadline", lambda: bool(checks))
    stopped = api.compare(config, tmp_path / "o", quiet=True, plots=False, threads=1, time_limit="1h")
    assert list(stopped) == [] and stopped.left == ["000_tr_full_s0", "001_tr_soft_s0"]
    line = capsys.readouterr().err
    assert "2 left: run 000_tr_full_s0 stopped at step 2 (continues from " in line
    assert "1 not started (001_tr_soft_s0)" in line and "None" not in line
