"""structattn.experiments.plots: what the learning curves draw (translation runs: dev BLEU, others: dev accuracy)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from structattn.experiments import plots  # noqa: E402


def _run(setting, seed, metric, dev_score=True):
    history = [{"step": s, "train_loss": 5.0 - s, "dev_accuracy": 0.1 * s,
                **({"dev_score": 10.0 * s + seed} if dev_score else {})} for s in (1, 2, 3)]
    return {"index": seed, "task_label": "t", "setting": setting, "seed": seed, "metric": metric, "history": history}


@pytest.fixture
def drawn(monkeypatch):
    """The figure a plot function saves, kept open for inspection."""
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    return figures


def test_translation_curves_show_dev_bleu_and_the_mean_over_seeds(drawn, tmp_path):
    plots.plot_learning_curves([_run("full", 0, "bleu"), _run("full", 2, "bleu")], tmp_path / "c.png")
    top = drawn[0].axes[0]
    assert top.get_ylabel() == "dev BLEU (greedy)"
    lines = [line.get_ydata().tolist() for line in top.get_lines()]
    assert lines == [[10.0, 20.0, 30.0], [12.0, 22.0, 32.0], [11.0, 21.0, 31.0]]  # two seeds, then their mean


@pytest.mark.parametrize("metric, dev_score", [("accuracy", True), ("bleu", False)])
def test_other_runs_and_runs_without_dev_scores_show_dev_accuracy(drawn, tmp_path, metric, dev_score):
    plots.plot_learning_curves([_run("full", 0, metric, dev_score)], tmp_path / "c.png")
    top = drawn[0].axes[0]
    assert top.get_ylabel() == f"dev {metric}"
    assert top.get_lines()[0].get_ydata().tolist() == pytest.approx([0.1, 0.2, 0.3])
