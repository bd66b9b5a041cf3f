"""results.csv and results.md from literal records."""

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


def test_markdown_mean_std_and_best_in_bold():
    text = markdown_text(RECORDS)
    assert "### depth" in text and "majority-class baseline 0.250" in text
    assert "| full | 0.550 ± 0.071 | 0.450 ± 0.071 | 2 |" in text
    assert "| **tree** | **0.750 ± 0.071** | 0.650 ± 0.071 | 2 |" in text


def test_single_seed_has_zero_std_and_tasks_are_separate():
    text = markdown_text([record(0, "full", 0, 0.5, 0.4), record(1, "full", 0, 0.9, 0.8, task="heads")])
    assert text.count("###") == 2 and "**0.500 ± 0.000**" in text and "**0.900 ± 0.000**" in text


def test_the_main_table_follows_the_tasks_metric():
    # a translation run reports BLEU: it heads the table and decides "best"; token accuracy goes to the second table
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
    assert "| **soft_bias** | **30.000 ± 0.000** | 31.000 ± 0.000 | 1 |" in text
    assert "| setting | chrf | test accuracy | dev accuracy |" in text


def test_a_record_without_its_metric_is_an_error():
    import pytest

    from structattn.experiments.results import table_metrics

    with pytest.raises(ValueError, match="reports metric 'bleu' but its metrics are"):
        table_metrics({"run_id": "r0", "metric": "bleu", "metrics": {"chrf": 1.0}})
