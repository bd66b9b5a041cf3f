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


def bias_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``{"task", "setting", "layer", "group", "labels", "mean", "std", "runs"}`` per (task, setting, layer,
    group) with a learned bias; ``mean`` / ``std`` per bucket over runs of head-averaged values."""
    cells: dict[tuple, list[list[float]]] = defaultdict(list)
    labels: dict[tuple, list[str]] = {}
    for r in records:
        for table in r.get("bias", []):
            group = table["group"] if table.get("name", "bias") == "bias" else f"{table['group']} {table['name']}"
            key = (r["task_label"], r["setting"], table["layer"], group)
            heads = table["values"]
            cells[key].append([statistics.fmean(h[k] for h in heads) for k in range(len(table["labels"]))])
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
