"""Results tables: ``results.csv`` (one row per run and metric), ``significance.csv`` (one row per paired test:
per seed and pooled over seeds) and ``results.md`` (mean +- std over seeds, then each task's pooled differences
to the reference setting with 95% CI, p and Holm-adjusted p; bold marks only what is significant at 0.05 after
Holm).

The tests themselves are in ``structattn.experiments.significance``: per seed, a paired test of the two runs
(sacrebleu's ``PairedTest`` for BLEU/chrF); pooled over seeds, a cluster test whose unit is the test item with
all its seeds' outputs (``cluster_accuracy_test``, ``cluster_corpus_test``, the latter with sacrebleu's p-value
definitions), so that a sentence scored once per seed is not counted as several independent items.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structattn.experiments.significance import (
    ALPHA,
    POWER,
    RESAMPLES,
    SEED,
    PairedResult,
    PairingError,
    SignificanceRow,
    compare_task,
    minimum_detectable_effect,
    paired_detectable_effect,
)
from structattn.experiments.record_checks import data_sha256
from structattn.training.precision import check_one_precision

CSV_COLUMNS = ("index", "run_id", "task", "setting", "seed", "metric", "value")
SIGNIFICANCE_COLUMNS = ("task", "setting", "reference", "scope", "metric", "diff", "ci_low", "ci_high", "p", "p_holm",
                        "significant", "n_items", "method", "note")
#: metrics in table order for accuracy tasks; the first is the one significance is marked on.
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
    """Run records by task label, then setting, in run order.

    Raises:
        ValueError: the runs trained in different precisions (:func:`structattn.training.precision.check_one_precision`),
            or runs of one task read data of different checksums (:func:`check_one_corpus`).
    """
    check_one_precision(records)
    check_one_corpus(records)
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in sorted(records, key=lambda r: r["index"]):
        out.setdefault(r["task_label"], {}).setdefault(r["setting"], []).append(r)
    return out


def check_one_corpus(records: Sequence[dict[str, Any]]) -> None:
    """Refuse runs of one task label whose data checksums differ (``provenance.data.sha256``: another version of
    the corpus, or another path to it), naming two such runs; records without one (:func:`data_sha256`) are not
    compared.

    Raises:
        ValueError: two runs of one task trained on different data.
    """
    first: dict[str, dict[str, Any]] = {}
    for r in records:
        sha = data_sha256(r)
        if sha is None:
            continue
        seen = first.setdefault(r["task_label"], r)
        other = data_sha256(seen) or sha
        if other != sha:
            raise ValueError(f"runs {seen['run_id']!r} and {r['run_id']!r} of task {r['task_label']!r} read different "
                             f"data (sha256 {other[:16]} vs {sha[:16]}: another version of the corpus); a table "
                             "compares runs on one data set: rerun one of them on the other's data")


def slug(text: str, limit: int = 40) -> str:
    """``text`` as a file-name fragment: runs of other characters become ``-``, at most ``limit`` long."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:limit] or "x"


@dataclass(frozen=True)
class TaskSignificance:
    """The paired tests of one task's settings against its reference setting.

    Attributes:
        reference: the reference setting.
        rows: per seed and pooled, every other setting and tested metric (``significance.compare_task``).
        error: why nothing could be tested (the reference has no runs, the runs cannot be paired), else "".
    """

    reference: str
    rows: list[SignificanceRow] = field(default_factory=list)
    error: str = ""
    resamples: int = RESAMPLES

    def pooled(self) -> list[SignificanceRow]:
        """The rows of the markdown table: pooled over seeds."""
        return [r for r in self.rows if r.scope == "pooled"]

    def bold(self) -> set[tuple[str, str]]:
        """``(setting, metric)`` whose pooled difference is significant at ``ALPHA`` after Holm."""
        return {(r.setting, r.metric) for r in self.pooled() if r.significant}


def reference_setting(settings: Sequence[str], reference: str | None = None) -> str:
    """``reference`` when given, else ``"full"`` when a setting is labelled so, else the first setting."""
    if reference is not None:
        return reference
    return "full" if "full" in settings else settings[0]


def significance(records: Sequence[dict[str, Any]], reference: str | None = None, method: str = "bootstrap",
                 resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, TaskSignificance]:
    """Per task label, every setting against the reference (``reference_setting`` of the task's settings).

    Never raises for old records: runs without per-item outputs give rows with ``result=None`` and a note;
    runs whose items cannot be paired give an ``error`` that the markdown prints.
    """
    out: dict[str, TaskSignificance] = {}
    for task, settings in group_runs(records).items():
        ref = reference_setting(list(settings), reference)
        if ref not in settings:
            out[task] = TaskSignificance(ref, error=f"the reference setting {ref!r} has no runs of this task")
            continue
        try:
            out[task] = TaskSignificance(ref, compare_task(task, settings, ref, method, resamples, seed),
                                         resamples=resamples)
        except PairingError as error:
            out[task] = TaskSignificance(ref, error=str(error))
    return out


def _significance_cells(row: SignificanceRow) -> list[object]:
    """The CSV cells of ``row`` after its metric: numbers with 6 decimals, empty when untested."""
    r = row.result
    if r is None:
        return [""] * 8 + [row.note]
    numbers = [f"{x:.6f}" for x in (r.diff, r.ci_low, r.ci_high, r.p, row.p_holm)]
    return [*numbers, row.significant, r.n_items, r.method, row.note]


def significance_csv_text(tests: dict[str, TaskSignificance]) -> str:
    """``significance.csv``: one row per (task, setting, scope, metric) in table order; untested rows keep empty
    numbers and a note (values with 6 decimals, so equal runs give equal files)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SIGNIFICANCE_COLUMNS)
    for task, tested in tests.items():
        for row in tested.rows:
            writer.writerow([task, row.setting, row.reference, row.scope, row.metric, *_significance_cells(row)])
    return buffer.getvalue()


def markdown_text(records: Sequence[dict[str, Any]], tests: dict[str, TaskSignificance] | None = None,
                  reference: str | None = None) -> str:
    """Per task, one row per setting: mean +- std over seeds of each metric, then the differences to the
    reference setting (``significance_lines``). Bold: a setting's mean whose pooled difference to the reference
    is significant at 0.05 after Holm (``tests``, computed here when not given)."""
    tests = significance(records, reference) if tests is None else tests
    lines: list[str] = []
    for task, settings in group_runs(records).items():
        first = next(iter(settings.values()))[0]
        metric = first.get("metric", "accuracy")
        baseline = first["metrics"].get("majority_baseline")
        note = "" if baseline is None else f"; majority-class baseline {baseline:.3f}"
        lines += [f"### {task}", "", f"`{first['task']}` — {metric}, mean ± std over seeds{note}", ""]
        columns, bold = table_metrics(first), tests[task].bold()
        lines += ["| setting | " + " | ".join(m.replace("_", " ") for m in columns) + " | seeds |",
                  "|---|" + "---:|" * len(columns) + "---:|"]
        for setting, rs in settings.items():
            cells = [_mean_cell([r["metrics"][m] for r in rs], (setting, m) in bold) for m in columns]
            name = f"**{setting}**" if (setting, columns[0]) in bold else setting
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {len(rs)} |")
        lines.append("")
        lines += _extra_table(settings, columns, bold)
        lines += significance_lines(tests[task])
    return "\n".join(lines)


def _mean_cell(values: Sequence[float], bold: bool = False) -> str:
    """``mean ± std`` with 3 decimals, ``–`` for no values, in bold when ``bold``."""
    if not values:
        return "–"
    cell = "{:.3f} ± {:.3f}".format(*mean_std(values))
    return f"**{cell}**" if bold else cell


#: metrics that stay out of the second table (per-head tree-induction UUAS are listed in the CSV only)
_NOT_EXTRA = ("test_loss", "majority_baseline")


def _extra_table(settings: dict[str, list[dict[str, Any]]], main: Sequence[str],
                 bold: AbstractSet[tuple[str, str]] = frozenset()) -> list[str]:
    """The other metrics (probe steps, chrF, token accuracy of translation runs), mean ± std over seeds, one
    column each (bold where significant, e.g. chrF); per-head UUAS stay in the CSV."""
    names = [m for m in next(iter(settings.values()))[0]["metrics"]
             if m not in (*main, *_NOT_EXTRA) and not m.startswith("tree_uuas_L")]
    if not names:
        return []
    lines = ["| setting | " + " | ".join(m.replace("_", " ") for m in names) + " |", "|---|" + "---:|" * len(names)]
    for setting, rs in settings.items():
        cells = [_mean_cell([r["metrics"][m] for r in rs if m in r["metrics"]], (setting, m) in bold) for m in names]
        lines.append(f"| {setting} | " + " | ".join(cells) + " |")
    return lines + [""]


_METHOD_WORDS = {"paired_bootstrap": "paired bootstrap", "sacrebleu_paired_bs": "sacrebleu's paired bootstrap",
                 "approximate_randomisation": "approximate randomisation (CI by paired bootstrap)",
                 "sacrebleu_paired_ar": "sacrebleu's approximate randomisation (CI by paired bootstrap)",
                 "cluster_paired_bootstrap": "paired bootstrap over test items (each with all its seeds' outputs)",
                 "cluster_approximate_randomisation": "approximate randomisation swapping whole test items (all "
                                                      "seeds; CI by paired bootstrap over items)",
                 "cluster_paired_bs": "paired bootstrap over test items (each with all its seeds' outputs; "
                                      "sacrebleu's p-value)",
                 "cluster_paired_ar": "approximate randomisation swapping whole test items (all seeds; sacrebleu's "
                                      "p-value; CI by paired bootstrap over items)"}


def _difference_cells(row: SignificanceRow) -> str:
    """``difference [95% CI] | p | p Holm`` of a pooled row; bold where significant after Holm."""
    r = row.result
    if r is None:
        return f"– ({row.note}) | – | –"
    diff, holm_p = f"{r.diff:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]", f"{row.p_holm:.3f}"
    if row.significant:
        diff, holm_p = f"**{diff}**", f"**{holm_p}**"
    return f"{diff} | {r.p:.3f} | {holm_p}"


def significance_lines(tested: TaskSignificance) -> list[str]:
    """The markdown "vs <reference>" section of one task: pooled differences with 95% CI, p and Holm p (bold
    where significant), then the test set's size, resamples and minimum detectable effect; one line when there
    is nothing to test (no lines for a task with a single setting)."""
    ref, pooled = tested.reference, tested.pooled()
    if tested.error:
        return [f"vs {ref}: no significance test ({tested.error}).", ""]
    done = [(r, r.result) for r in pooled if r.result is not None]
    if not done:
        notes = sorted({r.note for r in pooled})
        return [f"vs {ref}: {'; '.join(notes)}, so no significance test.", ""] if notes else []
    methods = ", ".join(dict.fromkeys(_METHOD_WORDS.get(res.method, res.method) for _, res in done))
    caption = (f"vs {ref} — test set, pooled over seeds; {methods}, {tested.resamples} resamples; bold: significant "
               f"at {ALPHA} after Holm over the table's {_count(len(done), 'comparison')}")
    lines = [caption, "",
             "| setting | metric | difference [95% CI] | p | p Holm |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r.setting} | {r.metric.replace('_', ' ')} | {_difference_cells(r)} |" for r in pooled]
    return lines + ["", _size_line(tested, done), *_untested_line(tested), ""]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _size_line(tested: TaskSignificance, done: list[tuple[SignificanceRow, PairedResult]]) -> str:
    """Items, seeds and resamples of the pooled tests, and the minimum detectable effect per metric."""
    first, pooled = done[0]
    seeds = [res.n_items for r in tested.rows if r.setting == first.setting and r.metric == first.metric
             and r.scope != "pooled" and (res := r.result) is not None]
    sizes = sorted(set(seeds))
    per_seed = (f"{sizes[0]} test items × " if len(sizes) == 1 else "") + _count(len(seeds), "seed")
    reference = {r.metric: res for r, res in done}  # the reference's pooled score and SE: the same for each setting
    mde = "; ".join(f"{m.replace('_', ' ')} {minimum_detectable_effect(res.reference_se):.3f} "
                    f"(at {tested.reference}'s pooled score {res.reference_score:.3f})" for m, res in reference.items())
    paired = "; ".join(f"{r.setting} {r.metric.replace('_', ' ')} {paired_detectable_effect(res):.3f}"
                       for r, res in done)
    return (f"{per_seed}; the pooled tests resample the {_count(pooled.n_items, 'test item')}, each with all its "
            f"seeds' outputs, {tested.resamples} resamples. Minimum detectable effect (alpha {ALPHA}, power "
            f"{POWER}, normal approximation, items as the unit): {mde}. With the pairing (from each comparison's "
            f"bootstrap spread of paired differences): {paired}.")


def _untested_line(tested: TaskSignificance) -> list[str]:
    """One line naming the per-seed comparisons left out of the pooled tests (and why), if any."""
    left = dict.fromkeys(f"{r.setting} {r.scope} ({r.note})" for r in tested.rows
                         if r.result is None and r.scope != "pooled")
    return [f"Left out: {', '.join(left)}."] if left else []


def write_tables(records: Sequence[dict[str, Any]], out_dir: Path, note: str = "", reference: str | None = None, *,
                 method: str = "bootstrap", resamples: int = RESAMPLES, seed: int = SEED) -> None:
    """Write ``results.csv``, ``significance.csv`` and ``results.md`` into ``out_dir``.

    Args:
        reference: the setting every other setting is tested against; default ``"full"`` when a setting is
            labelled so, else each task's first setting.
        method: ``"bootstrap"`` (paired bootstrap) or ``"ar"`` (approximate randomisation).
        resamples, seed: of every test (fixed, so the files are the same byte for byte).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    tests = significance(records, reference, method, resamples, seed)
    (out_dir / "results.csv").write_text(csv_text(records))
    (out_dir / "significance.csv").write_text(significance_csv_text(tests))
    header = "# Results\n\n" + (f"{note}\n\n" if note else "")
    (out_dir / "results.md").write_text(header + markdown_text(records, tests))
