"""Results tables: ``results.csv`` (one row per run and metric) and ``results.md`` (mean +- std over seeds)."""

from __future__ import annotations

import csv
import io
import re
import statistics
from pathlib import Path
from typing import Any, Sequence

CSV_COLUMNS = ("index", "run_id", "task", "setting", "seed", "metric", "value")
#: metrics in table order for accuracy tasks; the first is the one "best" is judged on.
TABLE_METRICS = ("test_accuracy", "dev_accuracy")


def table_metrics(record: dict[str, Any]) -> tuple[str, ...]:
    """The main table's columns for a task: its own metric first (``record["metric"]``: ``"accuracy"`` ->
    ``test_accuracy``, ``dev_accuracy``; ``"bleu"`` -> ``bleu``, ``dev_bleu``), so "best" is judged on it."""
    metric, present = record.get("metric", "accuracy"), record["metrics"]
    main = metric if metric in present else f"test_{metric}"
    columns = tuple(m for m in (main, f"dev_{metric}") if m in present)
    if not columns:
        raise ValueError(f"run {record.get('run_id')!r} reports metric {metric!r} but its metrics are {sorted(present)}")
    return columns


def csv_text(records: Sequence[dict[str, Any]]) -> str:
    """The CSV of ``records`` in run order (values with 6 decimals, so equal runs give equal files)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in sorted(records, key=lambda r: r["index"]):
        for metric, value in r["metrics"].items():
            writer.writerow([r["index"], r["run_id"], r["task_label"], r["setting"], r["seed"], metric, f"{value:.6f}"])
    return buffer.getvalue()


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def group_runs(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Run records by task label, then setting, in run order."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in sorted(records, key=lambda r: r["index"]):
        out.setdefault(r["task_label"], {}).setdefault(r["setting"], []).append(r)
    return out


def slug(text: str, limit: int = 40) -> str:
    """``text`` as a file-name fragment: runs of other characters become ``-``, at most ``limit`` long."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:limit] or "x"


def markdown_text(records: Sequence[dict[str, Any]]) -> str:
    """Per task, one row per setting: mean +- std over seeds of each metric; the best setting in bold."""
    lines: list[str] = []
    for task, settings in group_runs(records).items():
        first = next(iter(settings.values()))[0]
        metric = first.get("metric", "accuracy")
        baseline = first["metrics"].get("majority_baseline")
        note = "" if baseline is None else f"; majority-class baseline {baseline:.3f}"
        lines += [f"### {task}", "", f"`{first['task']}` — {metric}, mean ± std over seeds{note}", ""]
        columns = table_metrics(first)
        lines += ["| setting | " + " | ".join(m.replace("_", " ") for m in columns) + " | seeds |",
                  "|---|" + "---:|" * len(columns) + "---:|"]
        means = {s: mean_std([r["metrics"][columns[0]] for r in rs])[0] for s, rs in settings.items()}
        best = max(means.values())
        for setting, rs in settings.items():
            cells = []
            for m in columns:
                mean, std = mean_std([r["metrics"][m] for r in rs])
                cell = f"{mean:.3f} ± {std:.3f}"
                cells.append(f"**{cell}**" if m == columns[0] and means[setting] == best else cell)
            name = f"**{setting}**" if means[setting] == best else setting
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {len(rs)} |")
        lines.append("")
        lines += _extra_table(settings, columns)
    return "\n".join(lines)


#: metrics that stay out of the second table (per-head tree-induction UUAS are listed in the CSV only)
_NOT_EXTRA = ("test_loss", "majority_baseline")


def _extra_table(settings: dict[str, list[dict[str, Any]]], main: Sequence[str]) -> list[str]:
    """The other metrics (probe steps, chrF, token accuracy of translation runs), mean ± std over seeds, one
    column each; per-head UUAS stay in the CSV."""
    names = [m for m in next(iter(settings.values()))[0]["metrics"]
             if m not in (*main, *_NOT_EXTRA) and not m.startswith("tree_uuas_L")]
    if not names:
        return []
    lines = ["| setting | " + " | ".join(m.replace("_", " ") for m in names) + " |", "|---|" + "---:|" * len(names)]
    for setting, rs in settings.items():
        cells = []
        for m in names:
            values = [r["metrics"][m] for r in rs if m in r["metrics"]]
            cells.append("–" if not values else "{:.3f} ± {:.3f}".format(*mean_std(values)))
        lines.append(f"| {setting} | " + " | ".join(cells) + " |")
    return lines + [""]


def write_tables(records: Sequence[dict[str, Any]], out_dir: Path, note: str = "") -> None:
    """Write ``results.csv`` and ``results.md`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.csv").write_text(csv_text(records))
    header = "# Results\n\n" + (f"{note}\n\n" if note else "")
    (out_dir / "results.md").write_text(header + markdown_text(records))
