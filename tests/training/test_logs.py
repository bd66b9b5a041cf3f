"""The metrics log written while training: log.jsonl and log.csv (one row per evaluation, flushed as written),
appended on resume without repeating a step, TensorBoard scalars when tensorboard is installed."""

import csv
import importlib.util
import json

import pytest

from structattn.training import TrainConfig, Trainer, seed_everything
from structattn.training.metrics_log import MetricsLog, read_log, scalar_tag
from tests.training.util import encoded, model

COLUMNS = ["step", "epoch", "train_loss", "dev_loss", "dev_accuracy", "train_grad_norm_median", "train_grad_norm_max",
           "train_clip_factor_median", "lr", "elapsed_s"]


@pytest.fixture(scope="module")
def data():
    return encoded()


def trainer(vocab, output, checkpoint_dir, steps, **kwargs):
    seed_everything(0)
    config = TrainConfig(lr=3e-3, max_steps=steps, batch_size=8, eval_every=3, warmup_steps=2, patience=0)
    return Trainer(model(len(vocab)), config, output, quiet=True, checkpoint_dir=checkpoint_dir, **kwargs)


def csv_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_one_row_per_evaluation_in_both_files_flushed_as_written(data, tmp_path):
    task, vocab, examples = data
    run = trainer(vocab, task.output, tmp_path / "checkpoints", 9)
    seen = []  # the log's lines when each checkpoint is saved: the row is on disk before training goes on
    save = run._save
    run._save = lambda improved: (seen.append(len(read_log(tmp_path / "log.jsonl"))), save(improved))
    result = run.fit(examples["train"], examples["dev"])
    rows = read_log(tmp_path / "log.jsonl")
    assert seen == [1, 2, 3]
    assert [list(row) for row in rows] == [COLUMNS] * 3 and [row["step"] for row in rows] == [3, 6, 9]
    for row, history in zip(rows, result.history):  # the same numbers as the run's history
        assert {k: row[k] for k in history} == history
    assert all(row["epoch"] == (row["step"] - 1) // 6 for row in rows)  # 48 examples in batches of 8: 6 a pass
    assert 0 < rows[0]["elapsed_s"] <= rows[1]["elapsed_s"] <= rows[2]["elapsed_s"]
    table = csv_rows(tmp_path / "log.csv")
    assert list(table[0]) == COLUMNS
    assert [{k: float(v) for k, v in row.items()} for row in table] == rows
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["best.pt", "last.pt"]


def test_resume_appends_without_repeating_a_step(data, tmp_path):
    """A run stopped after writing the row of step 9 but before its checkpoint resumes from step 6: that row is
    dropped and written again, once."""
    task, vocab, examples = data
    trainer(vocab, task.output, tmp_path / "checkpoints", 6).fit(examples["train"], examples["dev"])
    before = read_log(tmp_path / "log.jsonl")
    with open(tmp_path / "log.jsonl", "a") as handle:
        handle.write(json.dumps({**before[-1], "step": 9, "train_loss": -1.0}) + "\n")
    resumed = trainer(vocab, task.output, tmp_path / "checkpoints", 12)
    resumed.fit(examples["train"], examples["dev"], resume=tmp_path / "checkpoints" / "last.pt")
    rows = read_log(tmp_path / "log.jsonl")
    assert [row["step"] for row in rows] == [3, 6, 9, 12] and rows[:2] == before
    assert rows[2]["train_loss"] > 0  # the stale row is gone
    assert [row["elapsed_s"] for row in rows] == sorted(row["elapsed_s"] for row in rows)  # time goes on
    assert [int(row["step"]) for row in csv_rows(tmp_path / "log.csv")] == [3, 6, 9, 12]
    assert [r["step"] for r in resumed.result.history] == [3, 6, 9, 12]


def test_a_fresh_run_starts_a_fresh_log(data, tmp_path):
    task, vocab, examples = data
    for _ in range(2):
        trainer(vocab, task.output, tmp_path / "checkpoints", 6).fit(examples["train"], examples["dev"])
    assert [row["step"] for row in read_log(tmp_path / "log.jsonl")] == [3, 6]


def test_where_the_log_goes(data, tmp_path):
    """Beside a folder named checkpoints (the run folder), else inside the checkpoint folder; nowhere without
    one, and not from a data-parallel process other than the main one."""
    task, vocab, examples = data
    trainer(vocab, task.output, tmp_path / "ckpt", 3).fit(examples["train"], examples["dev"])
    assert (tmp_path / "ckpt" / "log.jsonl").is_file() and not (tmp_path / "log.jsonl").exists()
    assert trainer(vocab, task.output, None, 3).log_dir is None
    quiet_rank = trainer(vocab, task.output, tmp_path / "other" / "checkpoints", 3)
    quiet_rank.writes_outputs = False
    quiet_rank.fit(examples["train"], examples["dev"])
    assert not (tmp_path / "other" / "log.jsonl").exists()


def test_a_new_column_rewrites_the_csv_header_and_a_broken_line_is_dropped(tmp_path, capsys):
    log = MetricsLog(tmp_path, tensorboard=False)
    log.write({"step": 1, "train_loss": 0.5})
    log.write({"step": 2, "train_loss": 0.4, "dev_score": 30.0})
    log.close()
    assert csv_rows(tmp_path / "log.csv") == [{"step": "1", "train_loss": "0.5", "dev_score": ""},
                                              {"step": "2", "train_loss": "0.4", "dev_score": "30.0"}]
    with open(tmp_path / "log.jsonl", "a") as handle:
        handle.write('{"step": 3, "train_lo')  # a run killed while writing
    assert [row["step"] for row in read_log(tmp_path / "log.jsonl")] == [1, 2]
    assert f"{tmp_path / 'log.jsonl'}: line 3 is not a JSON object; dropped" in capsys.readouterr().err
    MetricsLog(tmp_path, start_step=1, tensorboard=False).close()
    assert [row["step"] for row in read_log(tmp_path / "log.jsonl")] == [1]
    assert read_log(tmp_path / "missing.jsonl") == []


def test_scalar_tags():
    assert [scalar_tag(c) for c in COLUMNS] == ["step", "epoch", "train/loss", "dev/loss", "dev/accuracy",
                                               "train/grad_norm_median", "train/grad_norm_max",
                                               "train/clip_factor_median", "lr", "elapsed_s"]


def test_tensorboard_scalars(data, tmp_path):
    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip("tensorboard is not installed: the metrics log writes no TensorBoard events without it "
                    "(pip install tensorboard)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    task, vocab, examples = data
    trainer(vocab, task.output, tmp_path / "checkpoints", 6).fit(examples["train"], examples["dev"])
    trainer(vocab, task.output, tmp_path / "checkpoints", 9).fit(
        examples["train"], examples["dev"], resume=tmp_path / "checkpoints" / "last.pt")
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {"epoch", "train/loss", "dev/loss", "dev/accuracy", "lr", "elapsed_s",
                                             "train/grad_norm_median", "train/grad_norm_max",
                                             "train/clip_factor_median"}
    rows = read_log(tmp_path / "log.jsonl")
    scalars = events.Scalars("dev/accuracy")
    assert [s.step for s in scalars] == [3, 6, 9]
    assert [s.value for s in scalars] == pytest.approx([row["dev_accuracy"] for row in rows])


def test_a_translation_row_keeps_dev_score_before_lr(data):
    """Seq2SeqTrainer's history rows put dev_score after lr; the log keeps lr and elapsed_s last."""
    task, vocab, _ = data
    run = trainer(vocab, task.output, None, 3)
    row = {"step": 3, "train_loss": 1.0, "dev_loss": 2.0, "dev_accuracy": 0.5, "lr": 1e-3, "dev_score": 30.0}
    assert list(run._log_row(row)) == ["step", "epoch", "train_loss", "dev_loss", "dev_accuracy", "dev_score", "lr",
                                       "elapsed_s"]
