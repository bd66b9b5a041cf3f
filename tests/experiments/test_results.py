"""results.csv and results.md from literal records."""

import pytest

from structattn.experiments import csv_text, markdown_text


def record(index, setting, seed, test, dev, task="depth"):
    return {"index": index, "run_id": f"{index:03d}_{setting}_s{seed}", "task_label": task, "task": "depth_tagging()",
            "setting": setting, "seed": seed, "metric": "accuracy",
            "metrics": {"test_accuracy": test, "dev_accuracy": dev, "majority_baseline": 0.25}}


RECORDS = [record(2, "tree", 0, 0.70, 0.60), record(0, "full", 0, 0.50, 0.40), record(1, "full", 1, 0.60, 0.50),
           record(3, "tree", 1, 0.80, 0.70)]


def test_csv_has_one_row_per_run_and_metric_in_run_order():
    lines = csv_text(RECORDS).splitlines()
    assert lines[0] == "index,run_id,task,setting,seed,metric,value"
    assert len(lines) == 1 + 4 * 3
    assert lines[1] == "0,000_full_s0,depth,full,0,test_accuracy,0.500000"
    assert [line.split(",")[0] for line in lines[1:]] == [str(i) for i in range(4) for _ in range(3)]


def test_markdown_mean_std_and_no_bold_without_per_item_outputs():
    # the best mean is no longer bold: bold marks significant differences, and these records cannot be tested
    text = markdown_text(RECORDS)
    assert "### depth" in text and "majority-class baseline 0.250" in text
    assert "| full | 0.550 ± 0.071 | 0.450 ± 0.071 | 2 |" in text
    assert "| tree | 0.750 ± 0.071 | 0.650 ± 0.071 | 2 |" in text and "**" not in text
    assert "vs full: no per-item outputs, so no significance test." in text


def test_single_seed_has_zero_std_and_tasks_are_separate():
    text = markdown_text([record(0, "full", 0, 0.5, 0.4), record(1, "full", 0, 0.9, 0.8, task="heads")])
    assert text.count("###") == 2 and "| full | 0.500 ± 0.000 |" in text and "| full | 0.900 ± 0.000 |" in text
    assert "vs " not in text  # one setting per task: nothing to compare


def test_the_main_table_follows_the_tasks_metric():
    # a translation run reports BLEU: it heads the table (and would carry the bold); token accuracy goes to the
    # second table
    def run(index, setting, bleu, accuracy):
        return {"index": index, "run_id": f"r{index}", "task_label": "mt", "task": "translation_synthetic()",
                "setting": setting, "seed": 0, "metric": "bleu",
                "metrics": {"bleu": bleu, "dev_bleu": bleu + 1, "chrf": 50.0, "test_accuracy": accuracy,
                            "dev_accuracy": accuracy, "test_loss": 1.0}}

    from structattn.experiments.results import markdown_text, table_metrics

    records = [run(0, "full", 20.0, 0.9), run(1, "soft_bias", 30.0, 0.8)]
    assert table_metrics(records[0]) == ("bleu", "dev_bleu")
    text = markdown_text(records)
    assert "| setting | bleu | dev bleu | seeds |" in text
    assert "| soft_bias | 30.000 ± 0.000 | 31.000 ± 0.000 | 1 |" in text
    assert "| setting | chrf | test accuracy | dev accuracy |" in text


def test_a_record_without_its_metric_is_an_error():
    from structattn.experiments.results import table_metrics

    with pytest.raises(ValueError, match="reports metric 'bleu' but its metrics are"):
        table_metrics({"run_id": "r0", "metric": "bleu", "metrics": {"chrf": 1.0}})


# ---------------------------------------------------------------- significance in the tables

def counts(n, rate, seed):
    """Per-item (correct, total) of ``n`` sentences with 1-5 scored tokens, each right with probability ``rate``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    total = np.random.default_rng(100 + seed).integers(1, 6, n)  # the same test set for every setting of a seed
    return rng.binomial(total, rate).tolist(), total.tolist()


def with_outputs(index, setting, seed, rate, task="depth", n=80):
    correct, total = counts(n, rate, seed * 10 + index)
    r = record(index, setting, seed, sum(correct) / sum(total), 0.5, task)
    r["predictions"] = {"split": "test", "ids": [f"s{k}" for k in range(n)], "correct": correct, "total": total}
    return r


def test_tables_test_against_full_and_bold_only_the_significant(tmp_path):
    import csv

    from structattn.experiments import write_tables

    records = [with_outputs(0, "tree", 0, 0.8), with_outputs(1, "full", 0, 0.5), with_outputs(2, "same", 0, 0.5),
               with_outputs(3, "tree", 1, 0.8), with_outputs(4, "full", 1, 0.5), with_outputs(5, "same", 1, 0.5)]
    write_tables(records, tmp_path, resamples=200)
    text = (tmp_path / "results.md").read_text()
    assert "\n| **tree** | **0." in text and "\n| same | 0." in text and "\n| full | 0." in text  # full is the reference
    assert ("vs full — test set, pooled over seeds; paired bootstrap over test items (each with all its seeds' "
            "outputs), 200 resamples") in text
    assert "over the table's 2 comparisons" in text
    tree = next(line for line in text.splitlines() if line.startswith("| tree | test accuracy"))
    same = next(line for line in text.splitlines() if line.startswith("| same | test accuracy"))
    assert tree.count("**") == 4 and "**" not in same
    assert ("80 test items × 2 seeds; the pooled tests resample the 80 test items, each with all its seeds' outputs, "
            "200 resamples. Minimum detectable effect") in text
    rows = list(csv.DictReader((tmp_path / "significance.csv").open()))
    assert [(r["setting"], r["scope"]) for r in rows] == [(s, c) for s in ("tree", "same")
                                                         for c in ("seed 0", "seed 1", "pooled")]
    pooled = {r["setting"]: r for r in rows if r["scope"] == "pooled"}
    assert pooled["tree"]["significant"] == "True" and pooled["same"]["significant"] == "False"
    assert float(pooled["tree"]["ci_low"]) > 0 and pooled["tree"]["n_items"] == "80"  # items, each with 2 seeds
    assert pooled["tree"]["method"] == "cluster_paired_bootstrap"
    assert {r["method"] for r in rows if r["scope"] != "pooled"} == {"paired_bootstrap"}
    from structattn.experiments.significance import holm

    want = holm([float(pooled[s]["p"]) for s in ("tree", "same")])  # one family: the task's pooled rows
    assert [float(pooled[s]["p_holm"]) for s in ("tree", "same")] == pytest.approx(want, abs=2e-6)
    assert (tmp_path / "results.csv").read_text() == csv_text(records)  # the run rows are unchanged


def test_tables_are_byte_identical_across_writes_and_follow_the_reference(tmp_path):
    from structattn.experiments import write_tables

    records = [with_outputs(0, "tree", 0, 0.8), with_outputs(1, "base", 0, 0.5), with_outputs(2, "tree", 1, 0.8),
               with_outputs(3, "base", 1, 0.5)]
    for folder in ("a", "b"):
        write_tables(records, tmp_path / folder, resamples=100)
    for name in ("results.csv", "significance.csv", "results.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert "vs tree —" in (tmp_path / "a" / "results.md").read_text()  # no "full": the first setting in run order
    write_tables(records, tmp_path / "c", reference="base", resamples=100)
    assert "vs base —" in (tmp_path / "c" / "results.md").read_text()


def test_holm_decides_the_bold_not_the_raw_p():
    from dataclasses import replace

    from structattn.experiments.results import TaskSignificance
    from structattn.experiments.significance import (
        SignificanceRow,
        paired_bootstrap_accuracy,
        with_holm,
    )

    records = [record(0, "full", 0, 0.5, 0.4), record(1, "a", 0, 0.6, 0.4), record(2, "b", 0, 0.6, 0.4)]
    result = paired_bootstrap_accuracy(([1, 0], [1, 1]), ([1, 1], [1, 1]), 10)

    def table(p_a, p_b):
        rows = with_holm([SignificanceRow("depth", s, "full", "pooled", "test_accuracy", replace(result, p=p))
                          for s, p in (("a", p_a), ("b", p_b))])
        return markdown_text(records, {"depth": TaskSignificance("full", rows)})

    raw_only = table(0.03, 0.04)  # both below 0.05, Holm 0.06 and 0.06: nothing bold
    assert "**" not in raw_only and "| a | test accuracy | +0.500 [" in raw_only and "| 0.030 | 0.060 |" in raw_only
    one = table(0.01, 0.04)  # Holm 0.02 and 0.04: both bold
    assert "| **a** | **0.600 ± 0.000** |" in one and "| **b** | **0.600 ± 0.000** |" in one
    mixed = table(0.001, 0.2)  # Holm 0.002 and 0.2
    assert "| **a** |" in mixed and "| b | 0.600" in mixed and "| 0.200 | 0.200 |" in mixed


def test_missing_or_unpairable_outputs_never_stop_the_tables(tmp_path):
    from structattn.experiments import write_tables

    old = with_outputs(3, "tree", 1, 0.8)
    del old["predictions"]
    records = [with_outputs(0, "full", 0, 0.5), with_outputs(1, "tree", 0, 0.8), with_outputs(2, "full", 1, 0.5), old]
    text = markdown_text(records, reference=None)
    assert "Left out: tree seed 1 (no per-item outputs)." in text and "80 test items × 1 seed; the pooled tests resample the 80 test items" in text
    bad = with_outputs(1, "tree", 0, 0.8)
    bad["predictions"]["ids"] = list(reversed(bad["predictions"]["ids"]))
    write_tables([with_outputs(0, "full", 0, 0.5), bad], tmp_path)
    assert ("vs full: no significance test (runs '000_full_s0' and '001_tree_s0' cannot be paired: ids differ at "
            "item 0 (80 vs 80 items)).") in (tmp_path / "results.md").read_text()
    assert (tmp_path / "significance.csv").read_text() == (
        "task,setting,reference,scope,metric,diff,ci_low,ci_high,p,p_holm,significant,n_items,method,note\n")
    write_tables(RECORDS, tmp_path / "old")  # records from before per-item outputs
    assert (tmp_path / "old" / "significance.csv").read_text().splitlines()[1:] == [
        f"depth,tree,full,{scope},test_accuracy,,,,,,,,,no per-item outputs" for scope in ("seed 0", "seed 1", "pooled")]


def test_translation_tables_test_bleu_and_chrf(tmp_path):
    import random

    from structattn.experiments import write_tables
    from structattn.seq2seq.metrics import corpus_scores

    rng = random.Random(0)
    words = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "house", "red", "small", "big"]
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) for _ in range(30)]

    def run(index, setting, rate):
        hyps = [" ".join(w if rng.random() > rate else "zz" for w in r.split()) for r in refs]
        return {"index": index, "run_id": f"r{index}", "task_label": "mt", "task": "translation_synthetic()",
                "setting": setting, "seed": 0, "metric": "bleu", "metrics": {**corpus_scores(hyps, refs), "dev_bleu": 1.0},
                "predictions": {"split": "test", "ids": list(range(30)), "hyp": hyps, "ref": refs}}

    write_tables([run(0, "full", 0.6), run(1, "soft", 0.1)], tmp_path, resamples=100)
    text = (tmp_path / "results.md").read_text()
    assert "| **soft** | **" in text and "paired bootstrap over test items (each with all its seeds' outputs; " \
        "sacrebleu's p-value), 100 resamples" in text
    assert "| soft | bleu | **+" in text and "| soft | chrf | **+" in text
    assert "| soft | **" in text.split("| setting | chrf |")[1]  # chrF in the second table is bold too
    assert ("Minimum detectable effect (alpha 0.05, power 0.8, normal approximation, items as the unit): bleu "
            in text) and "; chrf " in text
