"""bf16 against fp32 training on real translation: the quick Multi30k config trained in both precisions, every
setting and seed paired with its twin, BLEU and chrF tested (issue #34, item 4: "no detectable difference").

    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/precision_check.py            # print the table
    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/precision_check.py --write    # and put it in comparisons.md

The two folders are compare folders (or kept ones) of ``configs/experiments/multi30k_quick.gin``, one run with
``--gin-param "training.precision = 'fp32'"``, the other with ``'bf16'``; the defaults are the kept records under
``results/precision_quick/``, made by:

    structattn compare configs/experiments/multi30k_quick.gin --out runs/quick_fp32 --threads 1 \\
        --gin-param "training.precision = 'fp32'"
    structattn compare configs/experiments/multi30k_quick.gin --out runs/quick_bf16 --threads 1 \\
        --gin-param "training.precision = 'bf16'"
    structattn keep runs/quick_fp32 results/precision_quick/fp32
    structattn keep runs/quick_bf16 results/precision_quick/bf16

Each (task, setting, seed) of the fp32 folder is paired with the same run of the bf16 folder (the same test
sentences), and tested with sacreBLEU's paired bootstrap (``significance.paired_corpus_test``), Holm over every
row. The table also gives the share of test sentences whose two translations are identical. ``--write``
replaces the block between ``<!-- precision-check:start -->`` and ``<!-- precision-check:end -->`` in
docs/comparisons.md; ``tests/test_precision_check.py`` checks that the file holds what this script prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling doc_blocks.py, however this is loaded
from doc_blocks import between, replace_block  # noqa: E402
RESULTS = ROOT / "results" / "precision_quick"
DOCS = ROOT / "docs" / "comparisons.md"
START, END = "<!-- precision-check:start -->", "<!-- precision-check:end -->"


def records_of(folder: Path, precision: str) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The checked records of ``folder`` (a compare folder or one of shards) by (task, setting, seed); every one
    must have trained in ``precision``."""
    from structattn.experiments.records import load_records
    from structattn.experiments.shards import shard_folders

    out = {}
    for sub in shard_folders(folder):
        for r in load_records(sub):
            if r.get("precision", "fp32") != precision:
                raise ValueError(f"{str(sub)!r}: run {r['run_id']!r} trained in {r.get('precision', 'fp32')}, not "
                                 f"{precision}: give the {precision} folder in this place")
            out[r["task_label"], r["setting"], r["seed"]] = r
    return out


def training_seconds(folder: Path) -> dict[str, float]:
    """Each run's training time by run id: the ``elapsed_s`` of the last row of its ``runs/<run_id>/log.jsonl``
    (counted across resumed sessions, unlike the ``time_s`` of records written before 78f9c5e); runs without a
    log are left out."""
    import json

    from structattn.experiments.shards import shard_folders

    out = {}
    for sub in shard_folders(folder):
        for log in sorted(sub.glob("runs/*/log.jsonl")):
            rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            if rows:
                out[log.parent.name] = float(rows[-1]["elapsed_s"])
    return out


def table(fp32: Path, bf16: Path) -> str:
    """The markdown block: one row per paired run and metric, then what it says."""
    from structattn.experiments.significance import ALPHA, holm, paired_corpus_test, paired_detectable_effect

    if not fp32.exists() or not bf16.exists():
        missing = " and ".join(str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
                               for p in (fp32, bf16) if not p.exists())
        return f"Not run yet: no records under {missing}.\n"
    a, b = records_of(fp32, "fp32"), records_of(bf16, "bf16")
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"the two folders hold different runs: {only} are in only one of them")
    rows = []
    for key in sorted(a):
        pa, pb = a[key]["predictions"], b[key]["predictions"]
        if list(pa["ids"]) != list(pb["ids"]) or list(pa["ref"]) != list(pb["ref"]):
            raise ValueError(f"run {key}: the fp32 and bf16 runs were tested on different sentences")
        same = sum(x == y for x, y in zip(pa["hyp"], pb["hyp"])) / len(pa["hyp"])
        for metric in ("bleu", "chrf"):
            rows.append((key, metric, paired_corpus_test(pa["hyp"], pb["hyp"], pa["ref"], metric), same))
    adjusted = holm([r[2].p for r in rows])
    lines = ["| task | setting | seed | metric | fp32 | bf16 | bf16 - fp32 [95% CI] | p | p Holm | detectable | "
             "identical translations |", "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (key, metric, r, same), p_holm in zip(rows, adjusted):
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {metric} | {r.reference_score:.2f} | "
                     f"{r.reference_score + r.diff:.2f} | {r.diff:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] | "
                     f"{r.p:.3f} | {p_holm:.3f} | {paired_detectable_effect(r):.2f} | {same:.1%} |")
    significant = [f"{key[1]} {metric}" for (key, metric, _, _), p in zip(rows, adjusted) if p < ALPHA]
    first = next(iter(a.values()))
    cpu = first.get("provenance", {}).get("cpu", "unknown CPU")
    threads = first.get("provenance", {}).get("torch_threads", "?")
    logged = {"fp32": training_seconds(fp32), "bf16": training_seconds(bf16)}
    if all(len(logged[p]) == len(recs) for p, recs in (("fp32", a), ("bf16", b))):
        what = "min of training (dev checks included, the test decode not; from each run's log.jsonl)"
        minutes = {p: sum(seconds.values()) / 60 for p, seconds in logged.items()}
    else:  # a folder without training logs: the records' run time
        what = "min of run time"
        minutes = {p: sum(float(r.get("time_s", 0.0)) for r in recs.values()) / 60 for p, recs in (("fp32", a), ("bf16", b))}
    verdict = (f"**A detectable difference**: {', '.join(significant)} (p Holm < {ALPHA})." if significant else
               f"**No detectable difference** between bf16 and fp32 training (every p Holm >= {ALPHA}).")
    lines += ["", f"sacreBLEU's paired bootstrap over the {len(pa['ids'])} test sentences, 1,000 resamples, Holm over "
              f"the {len(rows)} rows; \"detectable\" is the difference this pairing detects at power 0.8. Trained on "
              f"{cpu}, {threads} thread(s) a run: {minutes['fp32']:.0f} {what} in fp32, {minutes['bf16']:.0f} min in bf16. "
              f"{verdict}", ""]
    return "\n".join(lines)


def docs_text(text: str) -> str:
    """The block between the markers of docs/comparisons.md's text."""
    return between(text, START, END, "docs/comparisons.md").strip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fp32", nargs="?", type=Path, default=RESULTS / "fp32", help="the fp32 compare folder")
    parser.add_argument("bf16", nargs="?", type=Path, default=RESULTS / "bf16", help="the bf16 compare folder")
    parser.add_argument("--write", action="store_true", help="replace the block in docs/comparisons.md")
    args = parser.parse_args()
    body = table(args.fp32.resolve(), args.bf16.resolve())
    print(body, end="")
    if args.write:
        replace_block(DOCS, START, END, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
