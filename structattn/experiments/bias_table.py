"""The learned bias per distance bucket per layer, over seeds: a markdown table from run records.

Each record's ``bias`` (see :func:`structattn.experiments.inspect.bias_records`) holds, per layer and head
group, each learned quantity ``values[head][column]`` (a bias table per bucket, or e.g. a sigma; quantities other
than ``"bias"`` get their own rows, the group shown as ``"group name"``). The table averages heads within a run, then reports
mean ± std over the runs (seeds) of each setting, one row per (setting, layer, group), one column per
bucket, and marks the bucket with the largest mean bias.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from structattn.experiments.results import mean_std


def _head_mean(table: dict[str, Any]) -> list[float]:
    """A learned table's value per column, averaged over its heads."""
    return [statistics.fmean(h[k] for h in table["values"]) for k in range(len(table["labels"]))]


def bias_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``{"task", "setting", "layer", "group", "labels", "mean", "std", "runs"}`` per (task, setting, layer,
    group) with a learned bias; ``mean`` / ``std`` per bucket over runs of head-averaged values."""
    cells: dict[tuple, list[list[float]]] = defaultdict(list)
    labels: dict[tuple, list[str]] = {}
    for r in records:
        for table in r.get("bias", []):
            group = table["group"] if table.get("name", "bias") == "bias" else f"{table['group']} {table['name']}"
            key = (r["task_label"], r["setting"], table["layer"], group)
            cells[key].append(_head_mean(table))
            labels[key] = table["labels"]
    rows = []
    for key, runs in cells.items():
        columns = list(zip(*runs))
        rows.append({"task": key[0], "setting": key[1], "layer": key[2], "group": key[3], "labels": labels[key],
                     "mean": [mean_std(c)[0] for c in columns], "std": [mean_std(c)[1] for c in columns],
                     "runs": len(runs)})
    return rows


def bias_markdown(records: Sequence[dict[str, Any]], skip: Sequence[str] = ("unreachable",)) -> str:
    """The table (buckets named in ``skip`` left out); the largest mean bias of each row in bold."""
    rows = bias_rows(records)
    if not rows:
        return "No run learned a bias table.\n"
    lines = []
    for labels in {tuple(r["labels"]) for r in rows}:
        keep = [k for k, name in enumerate(labels) if name not in skip]
        lines += ["| task | setting | layer | " + " | ".join(f"d={labels[k]}" for k in keep) + " | runs |",
                  "|---|---|---:|" + "---:|" * len(keep) + "---:|"]
        for r in (r for r in rows if tuple(r["labels"]) == labels):
            top = max(keep, key=lambda k: r["mean"][k])
            cells = [f"{r['mean'][k]:+.2f} ± {r['std'][k]:.2f}" for k in keep]
            cells = [f"**{c}**" if k == top else c for k, c in zip(keep, cells)]
            lines.append(f"| {r['task']} | {r['setting']} | {r['layer']} | " + " | ".join(cells) + f" | {r['runs']} |")
        lines.append("")
    return "\n".join(lines)


def bias_peaks(records: Sequence[dict[str, Any]], skip: Sequence[str] = ("unreachable",)) -> list[dict[str, Any]]:
    """Each run's peak bucket: ``{"task", "setting", "layer", "group", "seeds", "peaks"}`` per (task, setting,
    layer, group) with a learned ``bias`` table, ``peaks[i]`` the label of the bucket where seed ``seeds[i]``'s
    head-averaged bias is largest (buckets named in ``skip`` left out; the first of equal largest values)."""
    found: dict[tuple, list[tuple[int, str]]] = defaultdict(list)
    for r in records:
        for table in r.get("bias", []):
            if table.get("name", "bias") != "bias":
                continue
            labels = table["labels"]
            keep = [k for k, name in enumerate(labels) if name not in skip]
            if not keep:
                raise ValueError(f"run {r.get('run_id')!r}, layer {table['layer']}: every bucket is skipped")
            mean = _head_mean(table)
            found[(r["task_label"], r["setting"], table["layer"], table["group"])].append(
                (r["seed"], labels[max(keep, key=lambda k: mean[k])]))
    return [{"task": key[0], "setting": key[1], "layer": key[2], "group": key[3],
             "seeds": [s for s, _ in sorted(runs)], "peaks": [p for _, p in sorted(runs)]}
            for key, runs in found.items()]


def peak_markdown(records: Sequence[dict[str, Any]], expected: str = "1",
                  skip: Sequence[str] = ("unreachable",)) -> str:
    """A table of :func:`bias_peaks`: per layer, the peak bucket of each seed and how many seeds peak at
    ``expected`` (the seeds' claim: the learned bias is largest at distance 1), then one line that counts the
    layers where every seed agrees."""
    rows = bias_peaks(records, skip)
    if not rows:
        return "No run learned a bias table.\n"
    lines = [f"| task | setting | layer | peak bucket per seed | seeds peaking at d={expected} |",
             "|---|---|---:|---|---:|"]
    for r in rows:
        per_seed = ", ".join(f"s{s}: d={p}" for s, p in zip(r["seeds"], r["peaks"]))
        agree = sum(p == expected for p in r["peaks"])
        lines.append(f"| {r['task']} | {r['setting']} | {r['layer']} | {per_seed} | {agree} of {len(r['peaks'])} |")
    every = sum(all(p == expected for p in r["peaks"]) for r in rows)
    lines += ["", f"d={expected} is the peak in every seed in {every} of {len(rows)} layers.", ""]
    return "\n".join(lines)
