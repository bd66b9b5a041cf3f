"""Hardening round 4, item 1: every record that merge and the tables read is checked, and a damaged one is
refused by file name (truncated, edited predictions, a checksum that no longer matches, missing fields, mixed
precisions or corpus versions); records are written atomically, so a kill leaves the old record or none."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from structattn import cli
from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, merge, run_comparison
from structattn.experiments.record_checks import (RecordError, check_record, read_record, record_checksum, stamped,
                                                  write_atomic)
from structattn.experiments.records import load_records
from structattn.experiments.results import group_runs
from structattn.training import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
TASK = "depth_tagging(limit=24, max_depth=3)"
SETUP = Setup(EncoderConfig(d_model=8, num_layers=1, num_heads=2, ffn_dim=8, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=1, max_steps=2, batch_size=8, eval_every=2, patience=0))
COMMITTED = ROOT / "results" / "multi30k_full_s0_bf16_step4000"


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    out = tmp_path_factory.mktemp("sharded")
    comparison = Comparison.declare({"depth": TASK}, {"full": "full", "mask": "hard_mask(dependency)"}, [0], SETUP)
    for k in range(2):
        run_comparison(comparison, out / f"shard-{k}-of-2", shard=(k, 2), quiet=True, plots=False)
    return out


@pytest.fixture
def copied(shards, tmp_path):
    return Path(shutil.copytree(shards, tmp_path / "copy"))


def record_file(folder: Path, shard: int) -> Path:
    return next((folder / f"shard-{shard}-of-2" / "runs").glob("*.json"))


def edit(path: Path, change, keep_checksum: bool = True) -> None:
    record = json.loads(path.read_text())
    change(record)
    if not keep_checksum:
        record.pop("checksum", None)
    path.write_text(json.dumps(record))


def test_written_records_carry_a_checksum_that_matches(shards):
    for k in range(2):
        record = json.loads(record_file(shards, k).read_text())
        assert record["checksum"] == record_checksum(record)


def test_a_truncated_record_is_refused_by_name_by_merge_and_the_cli(copied, tmp_path, capsys):
    path = record_file(copied, 1)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(RecordError, match=f"{path.name}'.*not valid JSON") as caught:
        merge([copied], tmp_path / "merged", plots=False)
    assert caught.value.path == str(path)
    assert cli.main(["merge", str(copied), "--out", str(tmp_path / "m2"), "--no-plots"]) == 1
    assert f"{path}" in capsys.readouterr().err and not (tmp_path / "m2" / "results.md").exists()


def test_predictions_edited_to_disagree_with_the_metrics_are_refused(copied, tmp_path):
    path = record_file(copied, 0)

    def all_right(record):
        record["predictions"]["correct"] = list(record["predictions"]["total"])

    edit(path, all_right)  # the checksum no longer holds
    with pytest.raises(RecordError, match=f"{path.name}': checksum: the record no longer matches"):
        merge([copied], tmp_path / "merged", plots=False)
    edit(path, lambda r: None, keep_checksum=False)  # an old record without a checksum: the metric is recomputed
    with pytest.raises(RecordError, match=r"metrics.test_accuracy: says .*, but its predictions give"):
        merge([copied], tmp_path / "merged", plots=False)


def test_predictions_of_another_number_of_items_are_refused(copied, tmp_path):
    path = record_file(copied, 0)

    def drop_one(record):
        p = record["predictions"]
        for name in ("ids", "correct", "total"):
            p[name] = p[name][1:]
        record["metrics"]["test_accuracy"] = sum(p["correct"]) / sum(p["total"])

    edit(path, drop_one, keep_checksum=False)
    with pytest.raises(RecordError, match=r"predictions.ids: holds 1 items, but the run's test split has 2"):
        merge([copied], tmp_path / "merged", plots=False)
    edit(path, lambda r: r["predictions"]["total"].append(3), keep_checksum=False)
    with pytest.raises(RecordError, match=r"predictions.total: has 2 entries for 1 item ids"):
        merge([copied], tmp_path / "merged", plots=False)


@pytest.mark.parametrize("name", ["plan", "task_label", "metrics"])
def test_a_record_missing_a_field_is_refused_naming_it(copied, tmp_path, name):
    path = record_file(copied, 1)
    edit(path, lambda r: r.pop(name), keep_checksum=False)
    with pytest.raises(RecordError, match=f"{path.name}': {name}: missing"):
        merge([copied], tmp_path / "merged", plots=False)


def test_an_old_record_without_a_checksum_is_read_and_said_once(copied, tmp_path, capsys):
    path = record_file(copied, 0)
    edit(path, lambda r: None, keep_checksum=False)
    merge([copied], tmp_path / "merged", plots=False)
    load_records(copied / "shard-0-of-2")
    err = capsys.readouterr().err
    assert err.count(f"run record {str(path)!r} has no checksum") == 1
    merged = json.loads((tmp_path / "merged" / "runs" / path.name).read_text())
    assert merged["checksum"] == record_checksum(merged)  # checked on read, stamped when merge writes it


def test_merge_refuses_shards_of_two_precisions_or_corpus_versions_naming_both(copied, tmp_path):
    first, second = copied / "shard-0-of-2", copied / "shard-1-of-2"
    path = record_file(copied, 1)
    original = json.loads(path.read_text())
    path.write_text(json.dumps(stamped({**original, "precision": "bf16"})))
    with pytest.raises(ValueError, match=f"{str(second)!r} trained in bf16 .* but {str(first)!r} in fp32"):
        merge([copied], tmp_path / "merged", plots=False)
    other = json.loads(json.dumps(original))
    other["provenance"]["data"]["sha256"] = "0" * 64
    path.write_text(json.dumps(stamped(other)))
    with pytest.raises(ValueError, match=f"{str(second)!r} trained task 'depth' on data sha256 0000.* but "
                                         f"{str(first)!r} on"):
        merge([copied], tmp_path / "merged", plots=False)


def test_tables_refuse_runs_of_one_task_on_two_corpus_versions(shards):
    records = load_records(shards / "shard-0-of-2") + load_records(shards / "shard-1-of-2")
    group_runs(records)
    records[1] = json.loads(json.dumps(records[1]))
    records[1]["provenance"]["data"]["sha256"] = "f" * 64
    with pytest.raises(ValueError, match=r"runs '000_depth_full_s0' and '001_depth_mask_s0' of task 'depth' read "
                                         r"different data \(sha256 .* vs ffff"):
        group_runs(records)


@pytest.mark.skipif(not os.environ.get("STRUCTATTN_MULTI30K"), reason="the committed record keeps no references: "
                    "they are read again from the Multi30k corpus, and STRUCTATTN_MULTI30K is not set")
def test_the_committed_record_is_checked_bleu_and_chrf_recomputed(tmp_path):
    records = load_records(COMMITTED)
    assert [r["run_id"] for r in records] == ["000_multi30k-en-de_full_s0"]
    assert len(records[0]["predictions"]["ref"]) == 1000  # restored from the corpus, sha256 checked
    copy = Path(shutil.copytree(COMMITTED, tmp_path / "committed"))
    path = next((copy / "runs").glob("*.json"))

    def edited(record):  # an edit that re-stamps the checksum: the recomputed BLEU still catches it
        record["predictions"]["hyp"][0] = "Ein Hund."
        record["checksum"] = record_checksum(record)
    edit(path, edited)
    with pytest.raises(RecordError, match=r"metrics.bleu: says 37.98.*, but sacrebleu gives"):
        load_records(copy)


def test_check_record_rejects_a_non_object_and_bad_counts(tmp_path):
    with pytest.raises(RecordError, match="holds a JSON list"):
        check_record(tmp_path / "x.json", [])
    good = {"index": 0, "run_id": "r", "task_label": "t", "task": "t", "setting": "s", "plan": "full", "seed": 0,
            "metric": "accuracy", "metrics": {"test_accuracy": 0.5},
            "predictions": {"ids": ["a"], "correct": [3], "total": [2]}}
    with pytest.raises(RecordError, match=r"predictions.correct: item 0 \('a'\) has 3 right out of 2"):
        check_record(tmp_path / "x.json", good)


KILLED_WRITER = """
import os, signal, sys
from structattn.experiments.record_checks import write_record_file
real = os.write
def write(fd, data):
    real(fd, bytes(data)[: len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)  # the machine goes down half-way through the write
os.write = write
write_record_file(sys.argv[1], {"run_id": "new", "payload": "x" * 100000})
"""


def test_a_kill_during_a_record_write_leaves_the_old_record(tmp_path):
    path = tmp_path / "runs" / "000_r.json"
    old = write_atomic(path, json.dumps(stamped({"run_id": "old"}))).read_text()
    child = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], cwd=ROOT, env=dict(os.environ))
    assert child.returncode == -signal.SIGKILL
    assert path.read_text() == old  # the half-written file is the temporary one, never the record
    assert sorted(p.name for p in path.parent.glob("*.json")) == ["000_r.json"]


def test_merge_writes_its_records_atomically(shards, tmp_path, monkeypatch):
    out = tmp_path / "merged"
    merge([shards], out, plots=False)
    before = {p.name: p.read_text() for p in (out / "runs").glob("*.json")}

    def killed(*args):
        raise KeyboardInterrupt  # dies after writing the temporary file, before it replaces the record

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        merge([shards], out, plots=False, mode="overwrite")
    monkeypatch.undo()
    for name, text in before.items():
        path = out / "runs" / name
        assert not path.exists() or path.read_text() == text
    assert all(read_record(p) for p in (out / "runs").glob("*.json"))
