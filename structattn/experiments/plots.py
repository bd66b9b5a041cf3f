"""Plots of a comparison (matplotlib, Agg backend): test scores per setting against the majority baseline,
learning curves, learned bias per distance bucket per layer, attention heatmaps with the gold structure
overlaid."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from structattn.experiments.results import group_runs, mean_std, slug, table_metrics  # noqa: E402

Record = dict[str, Any]


def _dev_key(runs: Sequence[Record]) -> str:
    """The dev curve to draw: the dev BLEU of translation runs (``dev_score``, when every check has it), else the
    dev accuracy."""
    has_score = all("dev_score" in h for r in runs for h in r["history"])
    return "dev_score" if has_score and runs[0].get("metric") == "bleu" else "dev_accuracy"


def plot_learning_curves(records: Sequence[Record], path: Path) -> Path:
    """Dev score and train loss against steps: one column per task, one colour per setting (thin: seeds,
    thick: mean over seeds at the steps all seeds reached). Translation runs show dev BLEU, the others dev
    accuracy."""
    tasks = group_runs(records)
    fig, axes = plt.subplots(2, len(tasks), figsize=(5.5 * len(tasks), 7), squeeze=False, sharex="col")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, (task, settings) in enumerate(tasks.items()):
        for k, (setting, runs) in enumerate(settings.items()):
            colour = colours[k % len(colours)]
            dev = _dev_key(runs)
            for row, key in enumerate((dev, "train_loss")):
                ax = axes[row, col]
                for r in runs:
                    ax.plot([h["step"] for h in r["history"]], [h[key] for h in r["history"]], color=colour, alpha=0.3, lw=1)
                common = sorted(set.intersection(*({h["step"] for h in r["history"]} for r in runs)))
                mean = [np.mean([h[key] for r in runs for h in r["history"] if h["step"] == s]) for s in common]
                ax.plot(common, mean, color=colour, lw=2, label=setting if row == 0 else None)
        axes[0, col].set_title(task)
        axes[0, col].set_ylabel("dev BLEU (greedy)" if _dev_key(runs) == "dev_score" else
                                f"dev {runs[0].get('metric', 'accuracy')}")
        axes[1, col].set_ylabel("train loss")
        axes[1, col].set_xlabel("step")
        axes[0, col].legend(fontsize=8)
        for ax in axes[:, col]:
            ax.grid(alpha=0.3)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))  # steps are whole numbers
    fig.suptitle("Learning curves (thin: seeds, thick: mean)")
    return _save(fig, path)


def plot_scores(records: Sequence[Record], path: Path) -> Path:
    """Test score per setting: one panel per task, a bar at the mean over seeds with a std error bar, one dot
    per seed, and the majority-class baseline as a dashed line (when the task has one)."""
    tasks = group_runs(records)
    fig, axes = plt.subplots(1, len(tasks), figsize=(max(4.5, 1.3 * max(map(len, tasks.values())) + 2) * len(tasks), 4.5),
                             squeeze=False)
    for ax, (task, settings) in zip(axes[0], tasks.items()):
        for x, (setting, runs) in enumerate(settings.items()):
            scores = [r["metrics"][table_metrics(r)[0]] for r in runs]
            mean, std = mean_std(scores)
            ax.bar(x, mean, yerr=std if len(scores) > 1 else None, capsize=4,
                   color="#9ecae1", edgecolor="#3182bd")
            ax.plot([x] * len(scores), scores, "o", color="#08519c", ms=4, alpha=0.8)
        baselines = [r["metrics"]["majority_baseline"] for runs in settings.values() for r in runs
                     if "majority_baseline" in r["metrics"]]
        if baselines:
            ax.axhline(baselines[0], color="grey", ls="--", lw=1, label=f"majority {baselines[0]:.3f}")
            ax.legend(fontsize=8, loc="lower right")
        ax.set_xticks(range(len(settings)), list(settings), rotation=30, ha="right")
        ax.set_ylabel(f"test {next(iter(settings.values()))[0].get('metric', 'accuracy')}")
        ax.set_title(task)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Test score per setting (bar: mean, error bar: std, dots: seeds)")
    return _save(fig, path)


def plot_bias(runs: Sequence[Record], path: Path) -> Path:
    """Learned bias per distance bucket, one line per layer (and head group): mean over seeds and heads,
    shaded between the heads' minimum and maximum."""
    first = runs[0]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    mixed = len({e["group"] for e in first["bias"]}) > 1
    banded = False  # a band is drawn only where a table has several heads: say so only then
    for k, entry in enumerate(first["bias"]):
        if entry["labels"] != first["bias"][0]["labels"]:  # another kind of quantity (e.g. a sigma): not on this axis
            continue
        values = np.mean([np.asarray(r["bias"][k]["values"]) for r in runs], axis=0)  # (heads, buckets)
        x = np.arange(values.shape[1])
        label = f"layer {entry['layer']}" + (f": {entry['group']}" if mixed else "")
        line = ax.plot(x, values.mean(0), marker="o", lw=2, label=label)[0]
        if values.shape[0] > 1:
            ax.fill_between(x, values.min(0), values.max(0), color=line.get_color(), alpha=0.15)
            banded = True
    labels = first["bias"][0]["labels"]
    ax.set_xticks(np.arange(len(labels)), labels, rotation=45 if max(len(s) for s in labels) > 3 else 0)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("distance bucket")
    ax.set_ylabel("learned bias (mean over seeds and heads;\nband: min-max over heads)" if banded
                  else "learned bias (mean over seeds;\none table for all heads)")
    groups = "" if mixed else f" [{first['bias'][0]['group']}]"
    ax.set_title(f"{first['setting']}{groups} on {first['task_label']} ({len(runs)} seed{'s' * (len(runs) > 1)})")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_heatmap(run: Record, path: Path) -> Path:
    """Head-averaged attention of each layer on one test sentence; gold arcs outlined in red."""
    heat = run["heatmap"]
    tokens, layers = heat["tokens"], heat["layers"]
    n = len(tokens)
    size = 0.32 * n + 1.5
    fig, axes = plt.subplots(1, len(layers), figsize=(size * len(layers), size + 0.6), squeeze=False)
    for layer, (ax, weights) in enumerate(zip(axes[0], layers)):
        image = ax.imshow(np.asarray(weights), cmap="Blues", vmin=0.0, vmax=max(1e-6, float(np.max(weights))))
        if heat["gold"]:
            gold = np.asarray(heat["gold"])
            ax.scatter(gold[:, 1], gold[:, 0], s=(200 / max(n, 1)) ** 2 * 0.9, marker="s", facecolors="none",
                       edgecolors="red", linewidths=1.2)
        ax.set_xticks(range(n), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(n), tokens, fontsize=7)
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.set_xlabel("key")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.02)
    axes[0, 0].set_ylabel("query")
    overlay = f"\nhead-averaged attention; red squares: gold {heat['gold_source']} arcs" if heat["gold"] else ""
    fig.suptitle(f"{run['setting']} on {run['task_label']}, seed {run['seed']}, sentence {heat['id']}{overlay}", fontsize=10)
    return _save(fig, path)


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(records: Sequence[Record], out_dir: Path) -> list[Path]:
    """All plots of a comparison under ``out_dir``: ``scores.png``, ``learning_curves.png``,
    ``bias_<task>_<setting>.png`` (settings with learned bias tables), ``attention_<task>_<setting>.png``
    (first seed)."""
    paths = [plot_scores(records, out_dir / "scores.png"), plot_learning_curves(records, out_dir / "learning_curves.png")]
    for task, settings in group_runs(records).items():
        for setting, runs in settings.items():
            stem = f"{slug(task, 60)}_{slug(setting, 60)}"
            if runs[0]["bias"]:
                paths.append(plot_bias(runs, out_dir / f"bias_{stem}.png"))
            if runs[0].get("heatmap"):
                paths.append(plot_heatmap(runs[0], out_dir / f"attention_{stem}.png"))
    return paths
