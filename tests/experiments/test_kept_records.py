"""Records kept as evidence (structattn keep): no checkpoints and no corpus text in the kept folder; references
come back from the corpus when the records are read, checked by their sha256, and the scores are recomputed;
merge --partial builds tables from the shards present."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU, CHRF

from structattn import cli
from structattn.experiments import merge
from structattn.experiments.keep import keep
from structattn.experiments.record_checks import RecordError, read_record, record_checksum, write_record_file
from structattn.experiments.records import load_records
from structattn.experiments.references import references_sha256, strip_references
from structattn.tasks.translation_multi30k import read_lines

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "multi30k_small"
TASK = 'translation_multi30k(src="en", tgt="de", shared_vocab=True)'
FINGERPRINT = "f00dfeedf00dfeed"


def make_record(index: int, setting: str, seed: int, refs: list[str]) -> dict:
    hyps = [" ".join(r.lower().split()[: 3 + (index + k) % 4]) for k, r in enumerate(refs)]  # per run; never a ref
    ids = [f"multi30k-test-{k + 1}" for k in range(len(refs))]
    metrics = {"bleu": BLEU(tokenize="13a", force=True).corpus_score(hyps, [refs]).score,
               "chrf": CHRF().corpus_score(hyps, [refs]).score}
    run_id = f"{index:03d}_m30k_{setting}_s{seed}"
    return {"index": index, "run_id": run_id, "task_label": "m30k", "task": TASK, "setting": setting,
            "plan": setting, "seed": seed, "metric": "bleu", "metrics": metrics, "history": [], "bias": [],
            "predictions": {"split": "test", "ids": ids, "hyp": hyps, "ref": refs},
            "samples": [{"id": i, "hyp": h, "ref": r, "src": "an English line"} for i, h, r in zip(ids, hyps, refs)][:3],
            "precision": "fp32", "fingerprint": FINGERPRINT,
            "provenance": {"data": {"task": TASK, "items": {"test": len(refs)}}}}


def write_folder(folder: Path, records: list[dict], total: int, shard=None) -> Path:
    (folder / "runs").mkdir(parents=True)
    manifest = {"fingerprint": FINGERPRINT, "runs": total, "shard": shard, "indices": [r["index"] for r in records],
                "run_ids": [r["run_id"] for r in records], "seeds": sorted({r["seed"] for r in records}),
                "reference": None}
    (folder / "comparison.json").write_text(json.dumps(manifest))
    (folder / "config.gin").write_text("training.precision = 'fp32'\n")
    for r in records:
        write_record_file(folder / "runs" / f"{r['run_id']}.json", r)
        (folder / "runs" / r["run_id"]).mkdir()
        (folder / "runs" / r["run_id"] / "log.jsonl").write_text('{"step": 1, "train_loss": 2.0}\n')
        (folder / "runs" / r["run_id"] / "best.pt").write_bytes(b"a checkpoint")
    return folder


@pytest.fixture
def refs():
    return read_lines(CORPUS / "test_2016_flickr.de.gz")


@pytest.fixture
def corpus(monkeypatch):
    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(CORPUS))
    return CORPUS


@pytest.fixture
def finished(tmp_path, refs):
    records = [make_record(k, setting, seed, refs) for k, (setting, seed) in
               enumerate([("full", 0), ("full", 1), ("soft", 0), ("soft", 1)])]
    return write_folder(tmp_path / "run", records, total=4)


def all_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_strip_drops_references_and_sample_sources_and_keeps_their_sha256(refs):
    record = make_record(0, "full", 0, refs)
    kept = strip_references(record)
    assert "ref" not in kept["predictions"] and kept["predictions"]["ref_sha256"] == references_sha256(refs)
    assert kept["predictions"]["hyp"] == record["predictions"]["hyp"]
    assert all(set(s) == {"id", "hyp"} for s in kept["samples"])
    assert record["predictions"]["ref"] == refs  # the input is not changed
    other = {**record, "task": "translation_synthetic(size=20)"}  # no reference source: its text is ours
    assert strip_references(other) == other


def test_keep_copies_records_and_logs_without_checkpoints_or_corpus_text(finished, tmp_path, refs, corpus):
    kept = keep(finished, tmp_path / "kept")
    dest = tmp_path / "kept"
    assert sorted(p.name for p in dest.rglob("*.pt")) == []
    assert (dest / "runs" / "000_m30k_full_s0" / "log.jsonl").is_file()
    text = all_text(dest)
    assert not [r for r in refs if r in text]  # no reference line in any kept file
    assert "an English line" not in text
    assert [r["predictions"]["ref"] for r in kept] == [refs] * 4  # read back from the corpus
    assert [r["metrics"] for r in kept] == [r["metrics"] for r in load_records(finished)]


def test_a_kept_record_is_read_with_its_references_and_scores_recomputed(finished, tmp_path, refs, corpus):
    keep(finished, tmp_path / "kept")
    path = tmp_path / "kept" / "runs" / "001_m30k_full_s1.json"
    record = read_record(path)
    assert record["predictions"]["ref"] == refs
    assert record["checksum"] == record_checksum(record)  # restoring references does not change the stamp
    stored = json.loads(path.read_text())
    stored["predictions"]["hyp"][0] = "Ein Hund."
    stored["checksum"] = record_checksum(stored)  # an edit that re-stamps: the recomputed BLEU still catches it
    path.write_text(json.dumps(stored))
    with pytest.raises(RecordError, match=r"001_m30k_full_s1.json': metrics.bleu: says .*, but sacrebleu gives"):
        read_record(path)


def test_a_kept_record_without_the_corpus_is_refused_by_name_saying_where_to_point(finished, tmp_path, corpus,
                                                                                     monkeypatch):
    keep(finished, tmp_path / "kept")
    monkeypatch.delenv("STRUCTATTN_MULTI30K")
    with pytest.raises(RecordError, match=r"000_m30k_full_s0.json': predictions.ref: .*could not be read again: "
                                          r"Multi30k: no data folder given.*STRUCTATTN_MULTI30K"):
        load_records(tmp_path / "kept")


def test_a_kept_record_read_against_another_corpus_version_is_refused(finished, tmp_path, corpus, monkeypatch):
    keep(finished, tmp_path / "kept")
    other = Path(shutil.copytree(CORPUS, tmp_path / "other"))
    lines = read_lines(other / "test_2016_flickr.de.gz")
    lines[4] = lines[4] + " Anders."
    with gzip.open(other / "test_2016_flickr.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(other))
    with pytest.raises(RecordError, match=r"predictions.ref: .*differ from those it was scored against .*another "
                                          r"version of the corpus"):
        load_records(tmp_path / "kept")


def test_merging_kept_folders_writes_records_still_without_references(finished, tmp_path, refs, corpus):
    keep(finished, tmp_path / "kept")
    merged = merge([tmp_path / "kept"], tmp_path / "merged", plots=False)
    assert len(merged) == 4
    assert not [r for r in refs if r in all_text(tmp_path / "merged" / "runs")]
    assert load_records(tmp_path / "merged")[0]["predictions"]["ref"] == refs


def test_keep_refuses_an_unfinished_folder_a_used_destination_and_itself(finished, tmp_path, corpus):
    (finished / "runs" / "003_m30k_soft_s1.json").unlink()
    with pytest.raises(ValueError, match=r"has runs without a record \(not finished yet\?\): 003_m30k_soft_s1"):
        keep(finished, tmp_path / "kept")
    kept = keep(finished, tmp_path / "partly", partial=True)  # the finished runs of a folder still training
    assert [r["run_id"] for r in kept] == ["000_m30k_full_s0", "001_m30k_full_s1", "002_m30k_soft_s0"]
    assert len(json.loads((tmp_path / "partly" / "comparison.json").read_text())["run_ids"]) == 4
    done = write_folder(tmp_path / "done", [make_record(0, "full", 0, read_lines(CORPUS / "test_2016_flickr.de.gz"))], 1)
    keep(done, tmp_path / "kept")
    with pytest.raises(ValueError, match="already holds files; pass --overwrite"):
        keep(done, tmp_path / "kept")
    keep(done, tmp_path / "kept", overwrite=True)
    with pytest.raises(ValueError, match="is the folder being kept"):
        keep(done, done)


def test_merge_partial_builds_tables_from_the_shards_present(tmp_path, refs, corpus):
    records = [make_record(k, setting, seed, refs) for k, (setting, seed) in
               enumerate([("full", 0), ("full", 1), ("soft", 0), ("soft", 1)])]
    write_folder(tmp_path / "all" / "shard-0-of-4", records[:1], 4, shard=[0, 4])
    write_folder(tmp_path / "all" / "shard-2-of-4", records[2:3], 4, shard=[2, 4])
    with pytest.raises(ValueError, match=r"runs \[1, 3\] are in none of the directories; .*pass --partial"):
        merge([tmp_path / "all"], tmp_path / "merged", plots=False)
    merged = merge([tmp_path / "all"], tmp_path / "merged", plots=False, partial=True)
    assert [r["run_id"] for r in merged] == ["000_m30k_full_s0", "002_m30k_soft_s0"]
    assert json.loads((tmp_path / "merged" / "comparison.json").read_text())["missing"] == [1, 3]
    assert "Partial: 2 of 4 runs" in (tmp_path / "merged" / "results.md").read_text()


def test_the_keep_command_says_what_it_kept(finished, tmp_path, corpus, capsys):
    assert cli.main(["keep", str(finished), str(tmp_path / "kept")]) == 0
    assert f"kept 4 run records of {finished} in {tmp_path / 'kept'}" in capsys.readouterr().out


def test_a_keep_that_fails_leaves_the_destination_as_it_was(finished, tmp_path, corpus, monkeypatch):
    monkeypatch.delenv("STRUCTATTN_MULTI30K")  # the read-back cannot restore the references
    with pytest.raises(RecordError, match="no data folder given"):
        keep(finished, tmp_path / "kept")
    assert not (tmp_path / "kept").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging folder left behind either
    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(CORPUS))
    keep(finished, tmp_path / "kept")
    before = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "kept").rglob("*") if p.is_file()}
    (finished / "runs" / "001_m30k_full_s1.json").write_text("{not json")
    with pytest.raises(RecordError, match="001_m30k_full_s1.json"):
        keep(finished, tmp_path / "kept", overwrite=True)
    monkeypatch.delenv("STRUCTATTN_MULTI30K")
    write_folder(tmp_path / "other", [make_record(0, "full", 0, read_lines(CORPUS / "test_2016_flickr.de.gz"))], 1)
    with pytest.raises(RecordError, match="no data folder given"):
        keep(tmp_path / "other", tmp_path / "kept", overwrite=True)
    after = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "kept").rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "other", "run"]
