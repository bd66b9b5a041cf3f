"""Translation runs through ``structattn compare``: BLEU / chrF in results.csv, bias tables in the records."""

import csv
import json

from structattn.experiments import gin_setup


def run_tiny(tmp_path, settings: str, steps: int = 30, bindings: tuple[str, ...] = ()):
    gin_setup.parse("configs/experiments/translation_quick.gin", [
        f"training.max_steps = {steps}", "training.eval_every = 15", "training.warmup_steps = 10",
        "compare.tasks = {'syn': 'translation_synthetic(train=120, dev=12, test=12, grammar_depth=1, max_words=9, beam=2)'}",
        f"compare.settings = {settings}", "compare.threads = 1", *bindings])
    return gin_setup.compare(tmp_path / "out", quiet=True, plots=False)


def test_compare_writes_bleu_and_chrf_and_bias(tmp_path):
    records = run_tiny(tmp_path, "{'full': 'full', 'soft': 'soft_bias(dependency)'}")
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    metrics = {(r["setting"], r["metric"]) for r in rows}
    assert {("full", "bleu"), ("full", "chrf"), ("soft", "bleu"), ("soft", "chrf")} <= metrics
    assert all(0.0 <= float(r["value"]) <= 100.0 for r in rows if r["metric"] in ("bleu", "chrf"))
    md = (tmp_path / "out" / "results.md").read_text()
    assert "bleu" in md and "chrf" in md and "majority" not in md
    by = {r["setting"]: r for r in records}
    assert by["full"]["bias"] == []
    bias = by["soft"]["bias"]
    assert [b["layer"] for b in bias] == [0, 1] and len(bias[0]["values"]) >= 1  # rows: heads (or one shared)
    assert len(bias[0]["values"][0]) == len(bias[0]["labels"])
    saved = json.loads(next((tmp_path / "out" / "runs").glob("*soft*.json")).read_text())
    assert saved["metrics"]["bleu"] == by["soft"]["metrics"]["bleu"]
    assert saved["provenance"]["data"]["items"] == {"train": 120, "dev": 12, "test": 12}
    assert (tmp_path / "out" / "runs" / saved["run_id"] / "checkpoints" / "best.pt").is_file()


def test_eval_rescores_a_translation_checkpoint_to_its_recorded_metrics(tmp_path, capsys):
    """``structattn eval`` rebuilds a translation run (both vocabularies, the encoder plan) and gives back its
    recorded test loss, accuracy, BLEU and chrF."""
    from structattn import cli

    records = run_tiny(tmp_path, "{'soft': 'soft_bias(dependency)'}")
    checkpoint = next((tmp_path / "out" / "runs").glob("*/checkpoints/best.pt"))
    capsys.readouterr()
    assert cli.main(["eval", str(checkpoint), "--quiet"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    recorded = records[0]["metrics"]
    assert scores["bleu"] == recorded["bleu"] and scores["chrf"] == recorded["chrf"]
    assert scores["loss"] == recorded["test_loss"] and scores["accuracy"] == recorded["test_accuracy"]
