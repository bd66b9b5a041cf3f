"""Parser-free structure (issue 6): train the ``learned_dependency`` predictor on the bundled Czech PUD gold
trees, report its UUAS on held-out sentences, then compare the quickstart end task (depth tagging) with gold
vs predicted structure vs full attention.

    python benchmarks/parser_free.py --out runs/parser_free            # ~5 min training + ~10 min compare

Splits are the depth_tagging task's (first 800 sentences train, next 100 dev, last 100 test): the
predictor learns from the train trees only (dev picks the epoch), so its trees of the test sentences are
predicted from words alone, as a parser would be used. Writes ``OUT/predictor.pt``, ``OUT/uuas.json``,
``OUT/uuas.md`` and the comparison (``OUT/compare/results.{csv,md}``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

import structattn.structures.learned  # noqa: F401  (registers "learned_dependency")
from structattn.experiments import gin_setup
from structattn.experiments.records import load_records
from structattn.experiments.run import evaluate_checkpoint, make_task
from structattn.probes.tree_induction import random_tree_uuas, right_branching_uuas
from structattn.training.checkpoints import load_checkpoint
from structattn.structures.learned import DistancePredictor, PredictorConfig, evaluate_uuas, train_predictor

ROOT = Path(__file__).resolve().parents[1]
TASK = "depth_tagging(max_depth=5)"


def train_and_score(out: Path, epochs: int, seed: int) -> dict:
    splits = make_task(TASK).splits()
    path = out / "predictor.pt"
    start = time.perf_counter()
    model, history = train_predictor(splits["train"], PredictorConfig(), epochs=epochs, seed=seed,
                                     dev=splits["dev"], progress=True)
    seconds = time.perf_counter() - start
    model.save(path)
    model = DistancePredictor.load(path)  # score what the provider will read
    rows = {}
    for split in ("train", "dev", "test"):
        items = splits[split]
        rows[split] = {"sentences": len(items), "learned": evaluate_uuas(model, items),
                       "right_branching": right_branching_uuas(items), "random_tree": random_tree_uuas(items, 10)}
    best = max(history, key=lambda r: r["dev_uuas"])
    return {"uuas": rows, "epochs": epochs, "best_epoch": best["epoch"], "train_seconds": seconds,
            "history": history, "path": str(path)}


def english_spacy_uuas(out: Path, epochs: int, seed: int) -> dict:
    """The same predictor trained on spaCy parses of the 1000 English PUD sentences (first 800 texts train,
    next 100 dev, last 100 test; sentences as spaCy splits them) and scored against spaCy's trees."""
    from structattn.structures.annotators import SpacyAnnotator

    lines = [t for t in (ROOT / "benchmarks" / "data" / "pud_en_sentences.txt").read_text(encoding="utf-8").splitlines() if t.strip()]
    grouped = SpacyAnnotator().annotate_grouped(lines)
    splits = {"train": grouped[:800], "dev": grouped[800:900], "test": grouped[900:]}
    splits = {k: [s for text in v for s in text] for k, v in splits.items()}
    model, history = train_predictor(splits["train"], PredictorConfig(), epochs=epochs, seed=seed, dev=splits["dev"],
                                     progress=True)
    model.save(out / "predictor_en_spacy.pt")
    rows = {split: {"sentences": len(items), "learned": evaluate_uuas(model, items),
                    "right_branching": right_branching_uuas(items), "random_tree": random_tree_uuas(items, 10)}
            for split, items in splits.items()}
    return {"uuas": rows, "best_epoch": max(history, key=lambda r: r["dev_uuas"])["epoch"], "epochs": epochs}


def uuas_table(report: dict) -> str:
    lines = ["| split | sentences | learned (MST of predicted distances) | right-branching chain | random tree |",
             "|---|---|---|---|---|"]
    for split, r in report["uuas"].items():
        lines.append(f"| {split} | {r['sentences']} | {r['learned']:.3f} | {r['right_branching']:.3f} | {r['random_tree']:.3f} |")
    return "\n".join(lines)


def run_compare(out: Path, predictor: Path, seeds: list[int], steps: int) -> None:
    bindings = [
        "import structattn.structures.learned",
        f"data.structures = {{'pred': 'learned_dependency(path=\"{predictor}\")'}}",
        "compare.settings = {'full': 'full', 'soft_bias(gold)': 'soft_bias(dependency)', "
        "'soft_bias(pred)': 'soft_bias(pred)', 'hard_mask(gold)': 'hard_mask(dependency)', "
        "'hard_mask(pred)': 'hard_mask(pred)'}",
        f"compare.seeds = {seeds}",
        f"training.max_steps = {steps}",
    ]
    gin_setup.parse(ROOT / "configs" / "quickstart.gin", bindings)
    gin_setup.compare(out / "compare", plots=False)


def swap_at_inference(out: Path, predictor: Path) -> str:
    """Models trained with gold trees, tested with the predicted trees in their place (no parser at test
    time): each gold run's best checkpoint is rebuilt with ``dependency`` bound to ``learned_dependency``."""
    spec = f"learned_dependency(path={str(predictor)!r})"
    rows = ["| trained with | tested with | seed | test accuracy |", "|---|---|---:|---:|"]
    scores: dict[str, list[float]] = {}
    for run in load_records(out / "compare"):  # checked records (a damaged one is refused by name)
        if not run["setting"].endswith("(gold)"):
            continue
        data = load_checkpoint(out / "compare" / "runs" / run["run_id"] / "checkpoints" / "best.pt")
        data["meta"]["structures"] = {name: spec for name in data["meta"]["structures"]}
        accuracy = evaluate_checkpoint(data, "test", quiet=True)["accuracy"]
        scores.setdefault(run["setting"], []).append(accuracy)
        rows.append(f"| {run['setting']} | predicted | {run['seed']} | {accuracy:.3f} |")
    for setting, values in scores.items():
        rows.append(f"| {setting} | predicted | mean ± std | {np.mean(values):.3f} ± {np.std(values, ddof=1):.3f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/parser_free"))
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="end-task seeds")
    parser.add_argument("--steps", type=int, default=600, help="end-task training steps (quickstart: 600)")
    parser.add_argument("--skip-train", action="store_true", help="reuse OUT/predictor.pt and OUT/uuas.json")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--english", action="store_true", help="also: the predictor on spaCy parses of English PUD")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.skip_train:
        report = json.loads((args.out / "uuas.json").read_text())
    else:
        report = train_and_score(args.out, args.epochs, args.seed)
        (args.out / "uuas.json").write_text(json.dumps(report, indent=1))
        (args.out / "uuas.md").write_text(uuas_table(report) + "\n")
    print(f"predictor: {report['epochs']} epochs in {report['train_seconds']:.0f} s, best dev epoch {report['best_epoch']}")
    print(uuas_table(report))
    if args.english:
        english = english_spacy_uuas(args.out, args.epochs, args.seed)
        (args.out / "uuas_en_spacy.json").write_text(json.dumps(english, indent=1))
        print(f"English PUD, spaCy trees as targets (best dev epoch {english['best_epoch']}):")
        print(uuas_table(english))
    if not args.skip_compare:
        run_compare(args.out, (args.out / "predictor.pt").resolve(), args.seeds, args.steps)
        print((args.out / "compare" / "results.md").read_text())
    if (args.out / "compare" / "runs").is_dir():
        table = swap_at_inference(args.out, (args.out / "predictor.pt").resolve())
        (args.out / "swap.md").write_text(table + "\n")
        print(table)


if __name__ == "__main__":
    main()
