"""Regenerate README.md's Hugging Face tables: a tiny MLM-pretrained BERT against its random-weight control
under the structural probes, and fine-tuning it with and without a dependency-tree ``soft_bias``.

    python scripts/hf_tables.py --out runs/hf_tables          # ~1 hour of CPU time on the 2-core machine

Everything is offline and seeded; each step is one structattn command (printed before it runs), so any step
can be re-run by hand:

1. ``grammar_text.txt``: 20,000 sentences of the built-in grammar (seed 0), one per line (MLM text), and
   ``grammar_treebank.conllu``: 1,000 other sentences (seed 1) with their gold trees (probing, fine-tuning).
2. ``structattn pretrain --text grammar_text.txt --out mlm``: a 4-layer, width-256 BERT, masked-LM
   pretrained with its own WordPiece vocabulary.
3. ``structattn probe mlm --treebank grammar_treebank.conllu --out probe``: per-layer distance and depth
   probes and per-head tree induction, for the model and a random-weight control of the same architecture.
4. ``structattn compare configs/experiments/hf_finetune.gin --out finetune`` with the settings pointed at
   ``mlm`` (``bert`` and ``bert+soft_bias``) and the tasks at ``grammar_treebank.conllu``: 2 tasks x 2
   settings x 3 seeds.

A step whose output folder is already complete is reused (its name is printed); nothing is overwritten.
At the end the two tables are printed in the README's form (``--tables-only`` just prints them).
Torch runs on one thread in every step (``OMP_NUM_THREADS=1``), so the numbers do not depend on the load,
and steps 3-4 on a given ``mlm`` folder are deterministic. Step 2 is not quite: ``tokenizers``' WordPiece
trainer assigns ids in hash-map order (huggingface/tokenizers#1794), so a fresh ``--out`` pretrains on a
slightly different vocabulary and the numbers move a little.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT_SENTENCES, TREEBANK_SENTENCES = 20_000, 1_000
PRETRAIN = ["--layers", "4", "--width", "256", "--steps", "2000", "--batch-size", "32", "--max-length", "64"]
PLAN = "soft_bias(dependency)@0-3; full"
FINETUNE_STEPS = 300


def write_grammar_data(out: Path) -> tuple[Path, Path]:
    """The MLM text and the gold-tree treebank (step 1); reused when both exist."""
    from structattn.structures.generators.grammar import GrammarGenerator
    from structattn.structures.readers.writer import write_conllu

    text, treebank = out / "grammar_text.txt", out / "grammar_treebank.conllu"
    if text.is_file() and treebank.is_file():
        print(f"reusing {text} and {treebank}")
        return text, treebank
    out.mkdir(parents=True, exist_ok=True)
    generator = GrammarGenerator(seed=0)
    text.write_text("".join(" ".join(generator.sentence().words) + "\n" for _ in range(TEXT_SENTENCES)),
                    encoding="utf-8")
    generator = GrammarGenerator(seed=1)
    write_conllu([generator.sentence() for _ in range(TREEBANK_SENTENCES)], treebank)
    print(f"wrote {text} ({TEXT_SENTENCES} sentences) and {treebank} ({TREEBANK_SENTENCES} sentences)")
    return text, treebank


def run(args: list[str], done: Path) -> None:
    """Run ``structattn ARGS`` unless ``done`` (the step's last output) exists."""
    if done.exists():
        print(f"reusing {done.parent}")
        return
    command = [sys.executable, "-m", "structattn.cli", *args]
    print("+ structattn " + " ".join(shlex.quote(a) for a in args), flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    subprocess.run(command, check=True, cwd=ROOT, env=env)


def finetune_params(mlm: Path, treebank: Path) -> list[str]:
    tasks = (f"compare.tasks = {{'depth': 'depth_tagging(max_depth=6, source=\"{treebank}\")', "
             f"'heads': 'head_selection(source=\"{treebank}\")'}}")
    settings = (f"compare.settings = {{'bert': 'hf(path=\"{mlm}\")', "
                f"'bert+soft_bias': 'hf(path=\"{mlm}\", plan=\"{PLAN}\")'}}")
    return ["--gin-param", tasks, "--gin-param", settings, "--gin-param", f"training.max_steps = {FINETUNE_STEPS}",
            "--gin-param", f"training.warmup_steps = {FINETUNE_STEPS // 10}", "--gin-param", "training.eval_every = 50",
            "--gin-param", "compare.threads = 1"]


def probe_table(probe_csv: Path) -> str:
    """Per layer: distance-probe UUAS and Spearman, depth-probe root accuracy, best attention head's UUAS,
    for the pretrained model and its control."""
    values: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    baselines: dict[str, float] = {}
    with probe_csv.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            key = (row["model"], int(row["layer"]))
            name = f"{row['probe']}:{row['metric']}"
            if row["head"] == "":
                values[key][name] = float(row["value"])
            if row["metric"].endswith("_baseline"):
                baselines[row["metric"]] = float(row["value"])
    models = list(dict.fromkeys(m for m, _ in values))  # the pretrained model first, then the control
    layers = sorted({l for _, l in values})
    columns = [("structural_distance:uuas", "distance UUAS"), ("structural_distance:spearman", "distance Spearman"),
               ("structural_depth:root_acc", "depth root acc."), ("structural_depth:spearman", "depth Spearman"),
               ("tree_induction:best_head_uuas", "best head's tree UUAS")]
    lines = [f"Each cell: {' / '.join(models)}.", "",
             "| layer | " + " | ".join(label for _, label in columns) + " |", "|---:|" + "---:|" * len(columns)]
    for layer in layers:
        cells = [" / ".join(f"{values[(m, layer)][key]:.3f}" for m in models) if key in values[(models[0], layer)]
                 else "" for key, _ in columns]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Tree-induction baselines: random trees {:.3f}, right-branching {:.3f} UUAS.".format(
        baselines.get("random_baseline", float("nan")), baselines.get("right_branching_baseline", float("nan"))))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/hf_tables", help="output folder (default runs/hf_tables)")
    parser.add_argument("--tables-only", action="store_true", help="only print the tables of a finished --out")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    if not args.tables_only:
        text, treebank = write_grammar_data(out)
        mlm, probe, finetune = out / "mlm", out / "probe", out / "finetune"
        run(["pretrain", "--text", str(text), "--out", str(mlm), *PRETRAIN], mlm / "pretrain.json")
        run(["probe", str(mlm), "--treebank", str(treebank), "--out", str(probe)], probe / "probe.csv")
        run(["compare", str(ROOT / "configs/experiments/hf_finetune.gin"), "--out", str(finetune),
             *finetune_params(mlm, treebank)], finetune / "results.md")
    print("\n## Structural probes: MLM-pretrained vs random control\n")
    print(probe_table(out / "probe" / "probe.csv"))
    print("\n## Fine-tuning\n")
    print((out / "finetune" / "results.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
