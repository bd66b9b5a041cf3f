"""The README's Multi30k headline rows, regenerated from the run records kept under ``results/plan/`` alone.

    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/translation_headline.py            # print the rows
    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/translation_headline.py --write    # and put them in README.md

The compute plan (docs/compute_plan.md) keeps every finished run with ``structattn keep`` under
``results/plan/<item>/`` (a compare folder, or a folder of ``shard-i-of-N`` ones). This script reads them with
the same checks as ``structattn merge`` (the references are read again from the corpus, so it needs
``STRUCTATTN_MULTI30K`` once any run is kept) and prints one markdown row per stage of the plan:

* the learning-rate tuning (``multi30k_lr_tuning.gin``, items ``tune_lr<rate>``): each setting's best dev BLEU
  at each rate, and the rate dev picks (test picks nothing);
* comparisons (a)-(c) (``multi30k_priors.gin``, ``multi30k_low_resource.gin``, ``multi30k_parser_noise.gin``,
  items ``a``, ``b``, ``c``): how many of their runs are kept and, once every run of one is, each setting's
  pooled BLEU difference to ``full`` with its 95% interval and Holm-corrected p (the paired bootstrap over test
  sentences clustered across seeds: :mod:`structattn.experiments.significance`) and a verdict: **holds** (a
  significant gain), **fails** (a significant loss, or an interval that excludes the claimed +0.5), or **this
  data cannot decide**.

``--write`` replaces the rows between ``<!-- multi30k-plan:start -->`` and ``<!-- multi30k-plan:end -->`` in
README.md; ``tests/test_translation_headline.py`` checks that README.md holds what this script prints.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "plan"
README = ROOT / "README.md"
START, END = "<!-- multi30k-plan:start -->", "<!-- multi30k-plan:end -->"
TUNING = "configs/experiments/multi30k_lr_tuning.gin"
#: (label, config, item folder under results/plan/)
COMPARISONS = [
    ("(a) priors at 29k pairs", "configs/experiments/multi30k_priors.gin", "a"),
    ("(b) low resource: 3k and 10k pairs", "configs/experiments/multi30k_low_resource.gin", "b"),
    ("(c) parser noise at 10k pairs", "configs/experiments/multi30k_parser_noise.gin", "c"),
]
CLAIMED = 0.5  # the seeds' smallest claimed gain, in BLEU


def planned_runs(config: str) -> int:
    """Runs of ``config``: tasks x settings x seeds of its ``compare`` bindings."""
    import gin

    from structattn.experiments import gin_setup

    gin_setup.parse(ROOT / config)
    size = 1
    for name in ("tasks", "settings", "seeds"):
        size *= len(gin.query_parameter(f"compare.{name}"))
    gin.clear_config()
    return size


def kept_records(item: Path) -> list[dict[str, Any]]:
    """The checked records of every compare folder at or under ``item`` (none when it does not exist)."""
    from structattn.experiments.records import load_records
    from structattn.experiments.shards import shard_folders

    if not item.exists():
        return []
    return [r for folder in shard_folders(item) for r in load_records(folder)]


def tuning_row(results: Path) -> str:
    from structattn.experiments.records import load_records
    from structattn.experiments.shards import shard_folders

    found = [(_lr(folder), r) for item in sorted(results.glob("tune_lr*")) for folder in shard_folders(item)
             for r in load_records(folder)]
    total = 2 * planned_runs(TUNING)
    cells, picks = [], []
    for setting in dict.fromkeys(r["setting"] for _, r in found):
        runs = sorted(((lr, r) for lr, r in found if r["setting"] == setting), key=lambda x: x[0])
        cells.append(f"{setting}: " + ", ".join(f"lr {lr:g} {r['metrics']['dev_bleu']:.2f}" for lr, r in runs))
        if len(runs) == 2:
            best_lr = max(runs, key=lambda x: x[1]["metrics"]["dev_bleu"])[0]
            picks.append(f"{setting} at lr {best_lr:g}")
    result = (f"dev BLEU (greedy, best checkpoint) {'; '.join(cells)}" if cells else "no run kept yet") + \
        f" ({len(found)} of {total} runs kept)"
    verdict = f"dev picks {', '.join(picks)}" if len(picks) == 2 else "**tuning not finished**"
    return (f"| learning-rate tuning (`{Path(TUNING).name}`: full and soft_bias(dep), seed 0, 10k pairs, 3,000 steps, "
            f"lr 1e-3 and 2e-3) | {result} | {verdict} |")


def _lr(folder: Path) -> float:
    """The peak learning rate bound in the kept folder's operative config."""
    found = re.findall(r"^training\.lr\s*=\s*([0-9.eE+-]+)\s*$", (folder / "config.gin").read_text(), re.MULTILINE)
    if not found:
        raise ValueError(f"{str(folder / 'config.gin')!r} binds no training.lr")
    return float(found[-1])


def comparison_row(label: str, config: str, records: list[dict[str, Any]], total: int) -> str:
    head = f"| {label} (`{Path(config).name}`, 3 seeds, one shared budget) |"
    if len(records) < total:
        return f"{head} {len(records)} of {total} runs kept | **this data cannot decide yet** |"
    from structattn.experiments.results import significance

    cells, verdicts = [], []
    for task, tested in significance(records).items():
        for row in tested.pooled():
            if row.metric != "bleu" or row.result is None:
                continue
            r = row.result
            cells.append(f"{task}: {row.setting} {r.diff:+.2f} BLEU [{r.ci_low:+.2f}, {r.ci_high:+.2f}] p Holm "
                         f"{row.p_holm:.3f}")
            verdicts.append(f"{row.setting} ({task}): {verdict(r.diff, r.ci_high, bool(row.significant))}")
    return f"{head} {'; '.join(cells)} | {'; '.join(verdicts)} |"


def verdict(diff: float, ci_high: float, significant: bool) -> str:
    """holds / fails / this data cannot decide, for the claim of a gain of at least ``CLAIMED`` BLEU."""
    if significant and diff > 0:
        return "**holds** (significant gain)"
    if significant or ci_high < CLAIMED:
        return "**fails**" + (" (significant loss)" if significant else f" (the interval excludes +{CLAIMED})")
    return "**this data cannot decide**"


HEADER = ["| Multi30k En->De, the compute plan's stages | result (kept runs only; pooled over seeds, Holm-corrected) "
          "| verdict |", "|---|---|---|"]


def rows(results: Path = RESULTS) -> list[str]:
    """The header and one row per stage of the plan, from the records kept under ``results``."""
    out = [*HEADER, tuning_row(results)]
    for label, config, item in COMPARISONS:
        out.append(comparison_row(label, config, kept_records(results / item), planned_runs(config)))
    return out


def readme_rows(text: str) -> list[str]:
    """The rows between the markers of README.md's text."""
    if START not in text or END not in text:
        raise ValueError(f"README.md has no {START} ... {END} block")
    return [line for line in text.split(START, 1)[1].split(END, 1)[0].splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the folder of kept plan items")
    parser.add_argument("--write", action="store_true", help="replace the rows between the markers in README.md")
    args = parser.parse_args()
    printed = rows(args.results)
    print("\n".join(printed))
    if args.write:
        text = README.read_text()
        readme_rows(text)  # the markers are there
        before, rest = text.split(START, 1)
        README.write_text(before + START + "\n" + "\n".join(printed) + "\n" + END + rest.split(END, 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
