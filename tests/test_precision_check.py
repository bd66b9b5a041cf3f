"""scripts/precision_check.py: bf16 runs paired with their fp32 twins (sacreBLEU's paired bootstrap, Holm), built
from copies of the committed fixture of kept records; docs/comparisons.md holds what the script prints."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from structattn.experiments.records import load_records
from structattn.experiments.significance import holm, paired_corpus_test

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "kept_records" / "folder"
spec = importlib.util.spec_from_file_location("precision_check", ROOT / "scripts" / "precision_check.py")
check = importlib.util.module_from_spec(spec)
sys.modules["precision_check"] = check
spec.loader.exec_module(check)


@pytest.mark.skipif(check.RESULTS.exists() and not os.environ.get("STRUCTATTN_MULTI30K"),
                    reason="records are kept under results/precision_quick/, and reading them needs the Multi30k "
                           "corpus (STRUCTATTN_MULTI30K is not set)")
def test_the_docs_block_is_what_the_script_prints():
    text = (ROOT / "docs" / "comparisons.md").read_text()
    assert check.docs_text(text) == check.table(check.RESULTS / "fp32", check.RESULTS / "bf16")


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """fp32: the fixture; bf16: its copy trained 'in bf16', where full's runs wrote soft_bias's translations."""
    from structattn.experiments.record_checks import write_record_file

    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(ROOT / "tests" / "fixtures" / "multi30k_small"))
    fp32, bf16 = tmp_path / "fp32", Path(shutil.copytree(FIXTURE, tmp_path / "bf16"))
    shutil.copytree(FIXTURE, fp32)
    (bf16 / "config.gin").write_text("training.precision = 'bf16'\ntraining.lr = 0.001\n")
    records = load_records(FIXTURE)
    soft = {r["seed"]: r for r in records if r["setting"] == "soft_bias(dep)"}
    for r in records:
        twin = soft[r["seed"]] if r["setting"] == "full" else r
        write_record_file(bf16 / "runs" / f"{r['run_id']}.json",
                          {**r, "precision": "bf16", "predictions": twin["predictions"], "metrics": twin["metrics"]})
    return fp32, bf16, records


def test_each_run_is_paired_with_its_twin_and_holm_covers_every_row(folders):
    fp32, bf16, records = folders
    text = check.table(fp32, bf16)
    by = {(r["setting"], r["seed"]): r["predictions"] for r in records}
    rows = []
    for setting in ("full", "soft_bias(dep)"):
        for seed in (0, 1):
            new = by["soft_bias(dep)", seed] if setting == "full" else by[setting, seed]
            for metric in ("bleu", "chrf"):
                rows.append((setting, seed, metric, paired_corpus_test(by[setting, seed]["hyp"], new["hyp"],
                                                                       by[setting, seed]["ref"], metric)))
    adjusted = holm([r[3].p for r in rows])
    for (setting, seed, metric, r), p in zip(rows, adjusted):
        same = "100.0%" if setting != "full" else None
        line = next(x for x in text.splitlines() if x.startswith(f"| m30k | {setting} | {seed} | {metric} |"))
        assert f"| {r.diff:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] | {r.p:.3f} | {p:.3f} |" in line
        if same:
            assert line.endswith(f"| {same} |") and r.diff == 0 and p == 1.0
        else:
            assert r.diff > 0 and not line.endswith("| 100.0% |")
    assert "Holm over the 8 rows" in text
    assert ("**A detectable difference**" in text) == any(p < 0.05 for p in adjusted)


def test_folders_in_the_wrong_places_or_with_other_runs_are_refused(folders):
    fp32, bf16, _ = folders
    with pytest.raises(ValueError, match="trained in fp32, not bf16: give the bf16 folder in this place"):
        check.table(fp32, fp32)
    (next((bf16 / "runs").glob("*_s1.json"))).unlink()
    with pytest.raises(ValueError, match="the two folders hold different runs"):
        check.table(fp32, bf16)
    assert check.table(fp32, bf16.parent / "nothing").startswith("Not run yet: no records under")


def test_the_time_is_the_logged_training_time_when_every_run_has_a_log(folders):
    fp32, bf16, records = folders
    assert "min of run time in fp32" in check.table(fp32, bf16)  # the fixture keeps no training logs
    for folder, seconds in ((fp32, 600.0), (bf16, 300.0)):
        for r in records:
            log = folder / "runs" / r["run_id"] / "log.jsonl"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text('{"step": 3, "elapsed_s": 1.0}\n' f'{{"step": 6, "elapsed_s": {seconds}}}\n')
    assert check.training_seconds(fp32) == {r["run_id"]: 600.0 for r in records}
    text = check.table(fp32, bf16)
    assert (f"{len(records) * 10} min of training (dev checks included, the test decode not; from each run's "
            f"log.jsonl) in fp32, {len(records) * 5} min in bf16") in text
