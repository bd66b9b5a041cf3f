"""scripts/translation_headline.py: the README's Multi30k plan rows are what the script prints from results/plan/;
tables built from a committed fixture of kept records (tests/fixtures/kept_records) agree with a direct
sacrebleu call; the verdict rule."""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from structattn.experiments import merge
from structattn.experiments.records import load_records
from structattn.experiments.significance import RESAMPLES, SEED

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "kept_records" / "folder"
CORPUS = ROOT / "tests" / "fixtures" / "multi30k_small"
spec = importlib.util.spec_from_file_location("translation_headline", ROOT / "scripts" / "translation_headline.py")
headline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(headline)

KEPT = sorted(p for p in headline.RESULTS.rglob("runs/*.json")) if headline.RESULTS.exists() else []


@pytest.mark.skipif(bool(KEPT) and not os.environ.get("STRUCTATTN_MULTI30K"),
                    reason="records are kept under results/plan/, and reading them needs the Multi30k corpus "
                           "(STRUCTATTN_MULTI30K is not set)")
def test_the_readme_rows_are_what_the_script_prints():
    assert headline.readme_rows((ROOT / "README.md").read_text()) == headline.rows()


def test_planned_runs_count_the_configs():
    assert [headline.planned_runs(config) for _, config, _ in headline.COMPARISONS] == [12, 18, 12]
    assert headline.planned_runs(headline.TUNING) == 2


@pytest.fixture
def corpus(monkeypatch):
    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(CORPUS))


def test_fixture_tables_agree_with_sacrebleus_paired_test(corpus, tmp_path, monkeypatch):
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    records = load_records(FIXTURE)
    merge([FIXTURE], tmp_path / "merged", plots=False)
    rows = {(r["scope"], r["metric"]): r for r in csv.DictReader((tmp_path / "merged" / "significance.csv").open())}
    by = {(r["setting"], r["seed"]): r for r in records}
    monkeypatch.setenv("SACREBLEU_SEED", str(SEED))
    for seed in (0, 1):
        base, new = (by[s, seed]["predictions"] for s in ("full", "soft_bias(dep)"))
        _, scores = PairedTest([("base", base["hyp"]), ("new", new["hyp"])], {"bleu": BLEU(force=True)},
                               [base["ref"]], test_type="bs", n_samples=RESAMPLES)()
        theirs_base, theirs_new = next(v for k, v in scores.items() if k != "System")
        row = rows[f"seed {seed}", "bleu"]
        assert float(row["diff"]) == pytest.approx(theirs_new.score - theirs_base.score, abs=1e-6)
        assert float(row["p"]) == pytest.approx(theirs_new.p_value, abs=1e-6)


def test_a_finished_comparison_row_gives_each_settings_pooled_difference_and_verdict(corpus):
    from structattn.experiments.results import significance

    records = load_records(FIXTURE)
    row = headline.comparison_row("(x) fixture", "configs/experiments/multi30k_priors.gin", records, 4)
    pooled = next(r for r in significance(records)["m30k"].pooled() if r.metric == "bleu")
    assert f"m30k: soft_bias(dep) {pooled.result.diff:+.2f} BLEU [{pooled.result.ci_low:+.2f}, " in row
    assert f"p Holm {pooled.p_holm:.3f}" in row
    assert pooled.result.diff > 0 and pooled.significant and "**holds** (significant gain)" in row
    unfinished = headline.comparison_row("(x) fixture", "configs/experiments/multi30k_priors.gin", records[:3], 4)
    assert unfinished.endswith("| 3 of 4 runs kept | **this data cannot decide yet** |")


def test_tuning_row_picks_each_settings_rate_on_dev(corpus, tmp_path):
    from structattn.experiments.record_checks import write_record_file

    plan = tmp_path / "plan"
    for lr, dev in (("0.001", {"full": 31.5, "soft_bias(dep)": 30.25}), ("0.002", {"full": 31.0, "soft_bias(dep)": 32.0})):
        folder = Path(shutil.copytree(FIXTURE, plan / f"tune_lr{lr}"))
        (folder / "config.gin").write_text(f"training.precision = 'fp32'\ntraining.lr = {lr}\n")
        for record in load_records(folder):
            path = folder / "runs" / f"{record['run_id']}.json"
            if record["seed"] != 0:  # the tuning runs seed 0 only
                path.unlink()
                continue
            write_record_file(path, {**record, "metrics": {**record["metrics"], "dev_bleu": dev[record["setting"]]}})
    text = headline.tuning_row(plan)
    assert "full: lr 0.001 31.50, lr 0.002 31.00; soft_bias(dep): lr 0.001 30.25, lr 0.002 32.00 (4 of 4 runs kept)" in text
    assert text.endswith("| dev picks full at lr 0.001, soft_bias(dep) at lr 0.002 |")
    shutil.rmtree(plan / "tune_lr0.002")
    assert headline.tuning_row(plan).endswith("(2 of 4 runs kept) | **tuning not finished** |")


@pytest.mark.parametrize("diff, high, significant, expected", [
    (0.8, 1.4, True, "**holds**"), (-0.6, -0.1, True, "**fails** (significant loss)"),
    (0.1, 0.4, False, "**fails** (the interval excludes +0.5)"), (0.3, 0.9, False, "**this data cannot decide**")])
def test_verdict_rule(diff, high, significant, expected):
    assert headline.verdict(diff, high, significant).startswith(expected)
