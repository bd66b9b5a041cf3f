"""scripts/translation_headline.py: the README's Multi30k plan rows are what the script prints from results/plan/;
tables built from a committed fixture of kept records (tests/fixtures/kept_records) agree with a direct
sacrebleu call; the verdict rule."""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from structattn.experiments import merge
from structattn.experiments.records import load_records
from structattn.experiments.significance import RESAMPLES, SEED, paired_detectable_effect

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "kept_records" / "folder"
CORPUS = ROOT / "tests" / "fixtures" / "multi30k_small"
spec = importlib.util.spec_from_file_location("translation_headline", ROOT / "scripts" / "translation_headline.py")
headline = importlib.util.module_from_spec(spec)
sys.modules["translation_headline"] = headline  # dataclasses look their module up
spec.loader.exec_module(headline)
import parser_uas  # noqa: E402 (scripts/ is on sys.path once translation_headline is loaded)

KEPT = sorted(p for p in headline.RESULTS.rglob("runs/*.json")) if headline.RESULTS.exists() else []


@pytest.mark.skipif(bool(KEPT) and not os.environ.get("STRUCTATTN_MULTI30K"),
                    reason="records are kept under results/plan/, and reading them needs the Multi30k corpus "
                           "(STRUCTATTN_MULTI30K is not set)")
def test_the_readme_rows_are_what_the_script_prints():
    assert headline.readme_rows((ROOT / "README.md").read_text()) == headline.rows()


@pytest.mark.skipif(bool(KEPT) and not os.environ.get("STRUCTATTN_MULTI30K"),
                    reason="records are kept under results/plan/, and reading them needs the Multi30k corpus "
                           "(STRUCTATTN_MULTI30K is not set)")
def test_the_docs_tables_are_what_the_script_prints():
    assert headline.docs_text((ROOT / "docs" / "comparisons.md").read_text()) == headline.docs_block()


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


FIXTURE_PLAN = headline.Plan(("m30k",), ("full", "soft_bias(dep)"), (0, 1), "full")


def test_a_finished_comparison_row_gives_each_settings_pooled_difference_and_verdict(corpus):
    from structattn.experiments.results import significance

    records = load_records(FIXTURE)
    row = headline.comparison_row("(x) fixture", "configs/experiments/multi30k_priors.gin", records, FIXTURE_PLAN)
    pooled = next(r for r in significance(records)["m30k"].pooled() if r.metric == "bleu")
    assert f"m30k: soft_bias(dep) {pooled.result.diff:+.2f} BLEU [{pooled.result.ci_low:+.2f}, " in row
    assert f"p Holm {pooled.p_holm:.3f}, detects {paired_detectable_effect(pooled.result):.2f}" in row
    assert "(the rest counted as p = 1)" not in row
    assert pooled.result.diff > 0 and pooled.significant and "**holds** (significant gain)" in row
    unfinished = headline.comparison_row("(x) fixture", "configs/experiments/multi30k_priors.gin", records[:3],
                                         FIXTURE_PLAN)
    assert unfinished.endswith("| 3 of 4 runs kept | **this data cannot decide yet** |")


def test_a_setting_is_judged_once_its_seeds_are_kept_with_holm_counting_the_missing_ones_as_p_one(corpus):
    """A third planned setting with no runs: soft_bias is tested already, its p Holm bounded from above by
    counting the missing comparisons (hard_mask's BLEU and chrF) as p = 1."""
    from structattn.experiments.results import significance
    from structattn.experiments.significance import holm

    records = load_records(FIXTURE)
    plan = headline.Plan(("m30k",), ("full", "soft_bias(dep)", "hard_mask(dep)"), (0, 1), "full")
    row = headline.comparison_row("(x) fixture", "x.gin", records, plan)
    pooled = [r for r in significance(records)["m30k"].pooled() if r.result is not None]
    bound = holm([r.result.p for r in pooled] + [1.0, 1.0])[[r.metric for r in pooled].index("bleu")]
    assert "4 of 6 runs kept; m30k: soft_bias(dep)" in row
    assert f"p Holm <= {bound:.3f} (the rest counted as p = 1)" in row
    assert bound >= next(r.p_holm for r in pooled if r.metric == "bleu")
    assert row.endswith("the other settings: not all seeds kept yet |")
    plan3 = headline.Plan(("m30k",), ("full", "soft_bias(dep)"), (0, 1, 2), "full")  # seed 2 not kept: untested
    assert headline.comparison_row("(x)", "x.gin", records, plan3).endswith(
        "| 4 of 6 runs kept | **this data cannot decide yet** |")
    judged_elsewhere = headline.comparison_row("(x)", "x.gin", records, FIXTURE_PLAN, judge=False)
    assert judged_elsewhere.endswith("| judged by the next row |")


def test_learnable_row_tests_soft_bias_against_fixed_decay_directly(corpus):
    """The fixture's full runs stand for fixed_decay: the row is soft_bias's pooled difference to them."""
    from structattn.experiments.results import significance

    records = [{**r, "setting": "fixed_decay(dep)"} if r["setting"] == "full" else r for r in load_records(FIXTURE)]
    plan = headline.Plan(("m30k",), ("full", "soft_bias(dep)", "fixed_decay(dep)"), (0, 1), "full")
    pooled = {r.metric: r for r in significance(records, "fixed_decay(dep)")["m30k"].pooled()}
    row = headline.learnable_row(records, plan)
    bleu = pooled["bleu"]
    assert f"m30k: {bleu.result.diff:+.2f} BLEU [{bleu.result.ci_low:+.2f}, {bleu.result.ci_high:+.2f}] " \
           f"p Holm {bleu.p_holm:.3f}" in row
    assert row.endswith("| m30k: **holds** (significant gain) |" if bleu.significant else "**this data cannot decide** |")
    assert headline.learnable_row(records[:3], plan).endswith("| **this data cannot decide yet** |")


def test_a_kept_run_without_per_item_outputs_is_refused_by_name(corpus):
    records = load_records(FIXTURE)
    records[2] = {k: v for k, v in records[2].items() if k != "predictions"}
    with pytest.raises(ValueError, match=f"run {records[2]['run_id']!r} \\(m30k, soft_bias\\(dep\\), seed 0\\) has no "
                                         "per-item test outputs"):
        headline.comparison_row("(x)", "x.gin", records, FIXTURE_PLAN)


def _relabelled(records, task, swap=False):
    """The records as runs of ``task``; with ``swap``, full's and soft_bias's predictions exchanged."""
    by = {(r["setting"], r["seed"]): r for r in records}
    other = {"full": "soft_bias(dep)", "soft_bias(dep)": "full"}
    return [{**r, "task_label": task,
             "predictions": by[other[r["setting"]], r["seed"]]["predictions"] if swap else r["predictions"]}
            for r in records]


def test_interaction_rows_test_the_gain_difference_between_tasks(corpus):
    """Task "small" is the fixture with the settings' outputs exchanged: its gain is minus the large task's, so
    the interaction is -2 x the pooled gain, and the claim that the gain grows fails."""
    from structattn.experiments.results import significance

    records = load_records(FIXTURE)
    gain = next(r for r in significance(records)["m30k"].pooled() if r.metric == "bleu").result.diff
    small_plan = headline.Plan(("small",), ("full", "soft_bias(dep)"), (0, 1), "full")
    tested, planned = headline.interactions(_relabelled(records, "small", swap=True), small_plan, records, FIXTURE_PLAN,
                                            ["soft_bias(dep)"])
    (t,) = tested
    assert planned == 1 and t.result.diff == pytest.approx(-2 * gain) and t.result.reference_score == pytest.approx(gain)
    assert t.p_holm == t.result.p and t.seeds == ([0, 1], [0, 1])
    row = headline.interaction_row("| (x) |", tested, planned, "larger", "smaller")
    assert f"soft_bias(dep) small minus m30k: {-2 * gain:+.2f} BLEU" in row
    assert row.endswith("| soft_bias(dep) (small): **fails** (smaller) |" if t.p_holm < 0.05 else
                        "| soft_bias(dep) (small): **this data cannot decide** |")
    same, _ = headline.interactions(_relabelled(records, "small"), small_plan, records, FIXTURE_PLAN,
                                    ["soft_bias(dep)"])
    assert same[0].result.diff == 0 and same[0].p_holm == 1.0
    two_tasks = headline.Plan(("small", "medium"), ("full", "soft_bias(dep)"), (0, 1), "full")
    tested, planned = headline.interactions(_relabelled(records, "small", swap=True), two_tasks, records,
                                            FIXTURE_PLAN, ["soft_bias(dep)"])
    assert planned == 2 and len(tested) == 1 and tested[0].p_holm == min(1.0, 2 * tested[0].result.p)
    assert headline.interaction_row("| (x) |", [], 2, "l", "s") == \
        "| (x) | 0 of 2 testable yet (every seed of both settings in both tasks) | **this data cannot decide yet** |"


def test_peak_row_counts_seeds_peaking_at_distance_one_per_layer(corpus):
    labels = ["0", "1", "2", "unreachable"]
    records = [{**r, "bias": [{"layer": 0, "group": "g", "labels": labels, "values": [[0.0, 1.0, 0.2, 0.0]]},
                              {"layer": 1, "group": "g", "labels": labels,
                               "values": [[0.0, 1.0 if r["seed"] else -1.0, 0.2, 0.0]]}]}
               for r in load_records(FIXTURE) if r["setting"] == "soft_bias(dep)"]
    row = headline.peak_row(records, FIXTURE_PLAN)
    assert "layer 0: d=1 in 2 of 2 seeds; layer 1: d=1 in 1 of 2 seeds (d=2, d=1)" in row
    assert row.endswith("| **holds in 1 of 2 layers** (every seed agreeing) |")
    assert headline.peak_row(records[:1], FIXTURE_PLAN).endswith("| 1 of 2 runs kept | **this data cannot decide yet** |")


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
    (0.1, 0.4, False, "**fails** (the interval excludes +0.5)"), (0.3, 0.9, False, "**this data cannot decide**"),
    (0.3, 0.45, True, "**holds in direction only** (significant gain, but the interval excludes +0.5)"),
    (0.3, 0.6, True, "**holds** (significant gain)")])
def test_verdict_rule(diff, high, significant, expected):
    assert headline.verdict(diff, high, significant).startswith(expected)


def test_each_setting_is_judged_against_its_own_claim():
    """ssan's claim starts at +0.6, soft_bias's at +0.5; hard_mask and fixed_decay claim no gain of their own,
    so their rows say only what the test shows."""
    assert [headline.claimed_gain(s) for s in ("soft_bias(dep)", "ssan", "hard_mask(dep)", "fixed_decay(dep)")] == [
        0.5, 0.6, None, None]
    assert headline.verdict(0.4, 0.55, True, 0.6).startswith("**holds in direction only** (significant gain, but "
                                                             "the interval excludes +0.6)")
    assert headline.verdict(-2.0, -1.0, True, None) == ("no claim of its own: **significantly worse** than the "
                                                        "reference")
    assert headline.verdict(0.2, 0.9, False, None) == "no claim of its own: **no detectable difference**"


def test_docs_block_gives_each_comparisons_cost_tables_interactions_and_floor(corpus, monkeypatch, tmp_path):
    """(a) and (c) hold the fixture, (b) the fixture as its 10k task: each section has its cost line and tables;
    (b) its gain difference against (a); (c) the floor from (b)'s full runs."""
    from structattn.experiments.results import mean_std

    records = load_records(FIXTURE)
    ten_k = _relabelled(records, "en->de 10k")
    plans = {"a": FIXTURE_PLAN, "b": headline.Plan(("en->de 10k",), FIXTURE_PLAN.settings, (0, 1), "full"),
             "c": FIXTURE_PLAN}
    item_of = {config: item for _, config, item in headline.COMPARISONS}
    monkeypatch.setattr(headline, "plan_of", lambda config: plans[item_of[config]])
    monkeypatch.setattr(headline, "kept_records", lambda path: {"a": records, "b": ten_k, "c": records}[path.name])
    text = headline.docs_block(tmp_path / "nothing kept")
    assert "#### learning-rate tuning (`multi30k_lr_tuning.gin`)\n\nNo run kept yet." in text
    for label, _, _ in headline.COMPARISONS:
        section = text.split(f"#### {label}", 1)[1].split("\n#### ", 1)[0]
        assert "4 runs kept, seeds 0, 1; fp32 on fixture" in section and "##### " in section, label
        assert "vs full — test set, pooled over seeds" in section, label
    (t,), _ = headline.low_resource_interactions({"a": records, "b": ten_k}, plans)
    assert (f"| soft_bias(dep) | en->de 10k minus m30k | {t.result.diff:+.2f} [{t.result.ci_low:+.2f}, "
            f"{t.result.ci_high:+.2f}] |") in text
    mean, std = mean_std([r["metrics"]["bleu"] for r in ten_k if r["setting"] == "full"])
    assert f"The floor, no prior: full at 10k pairs from (b) ('en->de 10k', the same subsample and test set), " \
           f"{mean:.2f} ± {std:.2f} BLEU over seeds 0, 1." in text


def test_docs_block_puts_every_tested_difference_under_both_p_values(corpus, monkeypatch, tmp_path):
    """The last docs table: each tested difference with sacrebleu's p and the two-sided bootstrap p of the same
    resamples, each Holm-corrected in its family, and whether they decide alike."""
    from structattn.experiments.results import significance
    from structattn.experiments.significance import ALPHA

    records = load_records(FIXTURE)
    plans = {"a": FIXTURE_PLAN, "b": headline.Plan(("m30k",), ("full", "fixed_decay(dep)"), (0, 1), "full"),
             "c": FIXTURE_PLAN}
    item_of = {config: item for _, config, item in headline.COMPARISONS}
    monkeypatch.setattr(headline, "plan_of", lambda config: plans[item_of[config]])
    monkeypatch.setattr(headline, "kept_records", lambda path: {"a": records, "b": [], "c": []}[path.name])
    text = headline.docs_block(tmp_path / "nothing kept").split("#### sacreBLEU's p and the two-sided bootstrap p")[1]
    moses = {r.metric: r for r in significance(records)["m30k"].pooled()}
    two = {r.metric: r for r in significance(records, method="bootstrap_two_sided")["m30k"].pooled()}
    for metric in ("bleu", "chrf"):
        a, b = moses[metric], two[metric]
        assert (a.result.diff, a.result.ci_low) == (b.result.diff, b.result.ci_low)
        assert a.result.p < b.result.p
        same = "yes" if (a.p_holm < ALPHA) == (b.p_holm < ALPHA) else "**no**"
        assert (f"| (a) m30k: soft_bias(dep) - full, {metric} | {a.result.diff:+.2f} [{a.result.ci_low:+.2f}, "
                f"{a.result.ci_high:+.2f}] | {a.result.p:.3f} | {a.p_holm:.3f} | {b.result.p:.3f} | {b.p_holm:.3f} | "
                f"{same} |") in text
    assert text.count("| (") == 2 and "of 2 tested differences are decided the same way by both" in text


def test_the_cost_line_counts_reused_runs_once():
    trained = {"setting": "soft_bias(dep)", "seed": 0, "steps": 6000, "stopped_early": False, "time_s": 7200.0,
               "precision": "bf16", "provenance": {"cpu": "AMD EPYC", "torch_threads": 1}}
    reused = {**trained, "setting": "hard_mask(dep)", "time_s": 3600.0,
              "provenance": {**trained["provenance"], "reused_from": {"run_id": "012_en-de-10k_soft-bias-dep_s0"}}}
    line = headline._cost_line([trained, reused])
    assert "2 runs kept, seeds 0; bf16 on AMD EPYC, 1 thread(s) a run; 2.0 h of run time for the 1 trained here " \
           "(1 identical runs of another comparison reused" in line
    assert "hard_mask(dep) s0: 6000 (cap), 1.00 h, reused from 012_en-de-10k_soft-bias-dep_s0" in line
    assert "3.0 h" not in line
    assert "2.0 h of run time in all" in headline._cost_line([trained])
    only_reused = headline._cost_line([reused])
    assert "none trained here (each is an identical run of another comparison" in only_reused
    assert "0.0 h" not in only_reused


def test_comparison_rows_say_how_many_runs_the_step_cap_stopped(corpus):
    """Runs that ran to the step cap make a budget-limited comparison, and the row says so; runs stopped by the
    dev patience add nothing to it."""
    records = load_records(FIXTURE)
    for r, (steps, best, early) in zip(records, [(6000, 6000, False), (6000, 5000, False), (4000, 2000, True),
                                                  (6000, 6000, False)]):
        r.update(steps=steps, best_step=best, stopped_early=early)
    row = headline.comparison_row("(x) fixture", "x.gin", records[:3], FIXTURE_PLAN)
    assert row.endswith("| 3 of 4 runs kept (2 of them stopped by the 6,000-step cap, not by the dev patience; 1 of "
                        "those with dev BLEU still at its best at the cap: differences hold at this budget, not "
                        "necessarily at convergence) | **this data cannot decide yet** |")
    for r in records:
        r.update(stopped_early=True)
    assert "cap" not in headline.comparison_row("(x) fixture", "x.gin", records, FIXTURE_PLAN)


def test_a_verdict_says_when_its_runs_gradients_exploded(corpus):
    """A setting whose runs record exploding gradients (hard ssan's straight-through estimator on Multi30k: an
    interval whose median step clipping shrank more than 10-fold, or a norm over 1,000 times its interval's
    median) gets its verdict qualified: it tests the recipe as much as the method; runs trained before the
    norms were recorded are counted apart, and ordinary runs change nothing."""
    records = load_records(FIXTURE)
    assert "exploded" not in headline.comparison_row("(x) fixture", "x.gin", records, FIXTURE_PLAN)

    def row(factor, median=1.0, largest=3.0):
        return {"train_clip_factor_median": factor, "train_grad_norm_median": median, "train_grad_norm_max": largest}

    soft = [r for r in records if r["setting"] == "soft_bias(dep)"]
    for r in records:  # two dev checks each; the reference's clipping never bit
        r["history"] = [{"step": 1000, **row(1.0)}, {"step": 2000, **row(1.0)}]
    soft[0]["history"][1].update(row(0.002, median=500.0, largest=900.0))
    soft[1]["history"] = [{"step": 1000}, {"step": 2000}]  # trained before the norms were recorded
    text = headline.comparison_row("(x) fixture", "x.gin", records, FIXTURE_PLAN)
    assert ("soft_bias(dep) (m30k): **holds** (significant gain) (its gradients exploded in 1 of the 1 runs that "
            "record them, 1 trained before they were recorded: median step shrunk up to 500-fold by clipping, norms "
            "up to 3 times their interval's median;") in text
    entry = next(e for e in headline._cost_line(records).split("; ") if e.startswith("soft_bias(dep) s0:"))
    assert entry.endswith(", gradients exploded (median step shrunk up to 500-fold, a norm 3 times its interval's "
                          "median)")
    # a spike alone (the median step unclipped) is enough: ssan seed 1 had a norm of 8.4e8 against a median of 1.02
    soft[0]["history"][1].update(row(0.98, median=1.02, largest=8.4e8))
    spiked = headline.comparison_row("(x) fixture", "x.gin", records, FIXTURE_PLAN)
    assert "record them, 1 trained before they were recorded: norms up to 8.2e+08 times their interval's median" \
        in spiked  # no 'shrunk up to 1-fold' for a median step clipping left alone
    entry = next(e for e in headline._cost_line(records).split("; ") if e.startswith("soft_bias(dep) s0:"))
    assert entry.endswith(", gradients exploded (a norm 8.2e+08 times its interval's median)")
    assert headline.gradient_health({"history": [{"step": 1}]}) is None
    assert headline.clipping_words([{"history": [row(0.2, median=1.0, largest=900.0)]}]) == ""


def test_the_parser_noise_row_quotes_the_kept_record(tmp_path):
    record = parser_uas.read_record(headline.PARSER_UAS)
    assert record is not None, f"{headline.PARSER_UAS} is not kept: run `python scripts/parser_uas.py --write`"
    note = headline.parser_note()
    assert f"UAS {record['scores']['uas']:.3f} against UD English PUD" in note
    assert f"{record['scores']['uas_no_punct']:.3f} without punctuation" in note
    assert "is not recorded: `python scripts/parser_uas.py --write`" in headline.parser_note(tmp_path / "none.json")


def test_the_effects_plot_draws_every_tested_difference_with_its_interval(corpus, tmp_path):
    """(a) and (c) hold the fixture, (b) the fixture as its 10k task: the effects are each comparison's pooled
    difference to full (soft_bias's row over the claimed band, except in (c), which judges no gain), then (b)'s
    gain difference against (a), with the same numbers as the README's rows; the plot is drawn, and so is an
    empty one."""
    from PIL import Image

    records = load_records(FIXTURE)
    ten_k = _relabelled(records, "en->de 10k")
    plans = {"a": FIXTURE_PLAN, "b": headline.Plan(("en->de 10k",), FIXTURE_PLAN.settings, (0, 1), "full"),
             "c": FIXTURE_PLAN}
    kept = {"a": records, "b": ten_k, "c": records}
    found = headline.effects(kept, plans)
    (t,) = headline.tested_settings(records, FIXTURE_PLAN)
    (g,), _ = headline.low_resource_interactions(kept, plans)
    assert [(e.group, e.label) for e in found] == [
        ("(a) m30k", "soft_bias(dep) - full"), ("(b) en->de 10k", "soft_bias(dep) - full"),
        ("(c) m30k", "soft_bias(dep) - full"), ("(b) gain grows?", "soft_bias(dep): gain at en->de 10k - gain at m30k")]
    assert (found[0].diff, found[0].low, found[0].high, found[0].significant) == (
        t.result.diff, t.result.ci_low, t.result.ci_high, t.significant)
    assert found[0].claim == (0.5, 1.0) and found[2].claim is None and found[3].claim is None
    assert found[3].diff == g.result.diff and found[3].significant == (g.p_holm < 0.05)
    for name, drawn in (("effects.png", found), ("none.png", [])):
        path = headline.plot_effects(drawn, tmp_path / name)
        with Image.open(path) as image:
            assert image.size[0] > 500 and image.size[1] > 100
