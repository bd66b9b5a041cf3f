"""Hewitt & Manning (2019)'s structural probes on a real pretrained encoder (all-MiniLM-L6-v2, installed offline),
against a random-weight control of the same architecture, with a probe-rank sweep and Clark et al. (2019)'s
trees from attention. Regenerates the table and figure of docs/probes.md:

    python scripts/probe_minilm.py --out runs/probe_minilm          # ~30 min of one CPU core

Data (``--train-treebank``): the probes train on UD English EWT dev (2,001 sentences; a seeded 10% of them
is the dev split that decides early stopping and the best layer) and are scored on UD English PUD (1,000
sentences, bundled). With ``--train-treebank pud`` (no EWT file at hand) PUD alone is cut, seeded, into
60% train, 10% dev and 30% test. ``--train-limit`` / ``--dev-limit`` / ``--test-limit`` take the first
sentences only (``--train-limit`` of the EWT file before the cut).

Per model and layer (0 = the embedding output, i.e. non-contextual word-piece + position embeddings; l = the
output of layer l): a full-rank distance probe (UUAS, distance Spearman) and a full-rank depth probe (root
accuracy, depth Spearman), trained with :func:`structattn.probes.structural.fit_probe` (the paper's
schedule: Adam 0.001, lr / 10 on a dev plateau, stop after 5 epochs without improvement, ``--epochs`` the
maximum) and scored on test with :func:`~structattn.probes.structural.evaluate` (punctuation excluded from
decoding, Spearman macro-averaged over lengths 5-50, as in the paper). Then a distance-probe rank sweep
(``--ranks``) at the pretrained model's best layer by dev UUAS, the best attention head's tree UUAS per
layer (``structattn.probes.tree_induction``, symmetric scoring), and baselines that need no training: the
paper's LINEAR chain (distance ``|i - j|``, depth ``i``) and a uniformly random tree.

Writes ``probe_minilm.csv`` (``model,layer,rank,head,probe,metric,value``), ``probe_minilm.md`` and
``probe_minilm.png`` into ``--out``. Deterministic for a ``--seed`` and thread count (``--threads``,
default 1: one thread is also the fastest on a shared machine).
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from structattn.probes import structural, tree_induction  # noqa: E402
from structattn.probes.stacking import chunks, pad_cat  # noqa: E402
from structattn.structures.sentence import Sentence  # noqa: E402

EWT_DEV = Path(os.environ.get("STRUCTATTN_DATA", "/work/shared/data")) / "ud_english" / "en_ewt-ud-dev.conllu"
RANKS = (1, 2, 4, 8, 16, 32, 64, 128, 384)
COLUMNS = ("model", "layer", "rank", "head", "probe", "metric", "value")
CONTROL = "random control"
BASELINE = "baseline"
OUTPUTS = ("probe_minilm.csv", "probe_minilm.md", "probe_minilm.png")


# -- data ------------------------------------------------------------------------------------------------------

def load_splits(train_treebank: str, seed: int, train_limit: int | None = None, test_limit: int | None = None,
                dev_limit: int | None = None) -> tuple[list[Sentence], list[Sentence], list[Sentence], str]:
    """(train, dev, test, a one-line description): EWT (a seeded 90/10 train/dev cut) and PUD test, or with
    ``train_treebank == "pud"`` a seeded 60/10/30 cut of PUD alone."""
    from structattn.structures.readers import load_bundled, read_conllu

    pud = load_bundled(treebank="en_pud")
    if train_treebank == "pud":
        order = list(range(len(pud)))
        random.Random(seed).shuffle(order)
        a, b = round(0.6 * len(order)), round(0.7 * len(order))
        train, dev, test = ([pud[i] for i in order[s]] for s in (slice(0, a), slice(a, b), slice(b, None)))
        source = "UD English PUD cut 60/10/30 (seeded)"
    else:
        path = Path(train_treebank)
        if not path.is_file():
            raise ValueError(f"--train-treebank {path} does not exist; pass the UD English EWT dev file or 'pud'")
        pool = read_conllu(path)[:train_limit]
        order = list(range(len(pool)))
        random.Random(seed).shuffle(order)
        cut = max(1, round(0.1 * len(order)))
        dev, train, test = [pool[i] for i in order[:cut]], [pool[i] for i in order[cut:]], pud
        source = f"train/dev: {path.name} cut 90/10 (seeded); test: UD English PUD"
    if train_treebank == "pud" and train_limit is not None:
        train = train[:train_limit]
    dev, test = dev[:dev_limit], test[:test_limit]
    if len(train) < 2 or not dev or not test:
        raise ValueError(f"too few sentences: train {len(train)} (need 2), dev {len(dev)}, test {len(test)}")
    return train, dev, test, f"{source}: {len(train)} train, {len(dev)} dev, {len(test)} test sentences"


@torch.no_grad()
def encode_states(model: Any, tokenizer: Any, sentences: Sequence[Sentence], keep_attention: bool,
                  batch_size: int = 32, progress: bool = False) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Word-level states per layer (embeddings first) and, if asked, word-level attention per layer, encoded
    256 sentences at a time so that the attention of a long corpus is never held at once.

    Shapes:
        states[l] (s, w, d); attentions[l] (s, h, w, w) (empty list unless ``keep_attention``).
    """
    from structattn.experiments.probe_command import encode

    states: list[list[torch.Tensor]] = []
    attentions: list[list[torch.Tensor]] = []
    for part in chunks(sentences, 256):
        s, a = encode(model, tokenizer, part, batch_size, progress=False)
        states.append(s)
        attentions.append(a if keep_attention else [])
        if progress:
            tqdm.write(f"  encoded {sum(len(x[0]) for x in states)}/{len(sentences)} sentences")
    layers = len(states[0])
    return ([pad_cat([s[l] for s in states]) for l in range(layers)],
            [pad_cat([a[l] for a in attentions]) for l in range(layers - 1)] if keep_attention else [])


def word_mask(sentences: Sequence[Sentence], words: int) -> torch.Tensor:
    """(s, words) bool, ``True`` on each sentence's words."""
    return torch.arange(words)[None, :] < torch.tensor([len(s) for s in sentences])[:, None]


# -- probes ----------------------------------------------------------------------------------------------------

def row(model: str, layer: int | str, rank: int | str, head: int | str, probe: str, metric: str,
        value: float) -> dict[str, Any]:
    return {"model": model, "layer": layer, "rank": rank, "head": head, "probe": probe, "metric": metric,
            "value": float(value)}


def fit_and_score(kind: str, rank: int, layer_states: dict[str, torch.Tensor], splits: dict[str, list[Sentence]],
                  epochs: int, seed: int) -> tuple[dict[str, float], structural.FitCurve]:
    """Train one probe (``kind`` "distance" or "depth") on train with early stopping on dev; test metrics
    plus ``dev_uuas`` (distance) for choosing the layer."""
    cls = structural.DistanceProbe if kind == "distance" else structural.DepthProbe
    data = {name: (h, word_mask(splits[name], h.shape[1]), splits[name]) for name, h in layer_states.items()}
    probe = cls(layer_states["train"].shape[-1], rank)
    curve = structural.fit_probe(probe, *data["train"], epochs=epochs, seed=seed, dev=data["dev"], progress=False)
    scores = structural.evaluate(probe, *data["test"])
    if kind == "distance":
        scores["dev_uuas"] = structural.evaluate(probe, *data["dev"])["uuas"]
    scores["epochs"], scores["best_epoch"] = float(curve.epochs_run), float(curve.best_epoch + 1)
    return scores, curve


METRICS = {"distance": ("uuas", "spearman", "dev_uuas", "epochs", "best_epoch"),
           "depth": ("root_acc", "spearman", "epochs", "best_epoch")}


def probe_layers(name: str, states: dict[str, list[torch.Tensor]], splits: dict[str, list[Sentence]],
                 epochs: int, seed: int, bar: tqdm) -> list[dict[str, Any]]:
    """Full-rank distance and depth probes on every layer of one model."""
    rows = []
    for layer in range(len(states["train"])):
        layer_states = {split: states[split][layer].float() for split in ("train", "dev", "test")}
        width = layer_states["train"].shape[-1]
        for kind in ("distance", "depth"):
            bar.set_description(f"{name}: layer {layer} {kind}")
            scores, _ = fit_and_score(kind, width, layer_states, splits, epochs, seed)
            rows += [row(name, layer, width, "", kind, m, scores[m]) for m in METRICS[kind]]
            bar.update()
    return rows


def rank_sweep(name: str, layer: int, states: dict[str, list[torch.Tensor]], splits: dict[str, list[Sentence]],
               ranks: Sequence[int], epochs: int, seed: int, bar: tqdm) -> list[dict[str, Any]]:
    """Distance probes of each rank at one layer (ranks above the width are capped to it)."""
    layer_states = {split: states[split][layer].float() for split in ("train", "dev", "test")}
    rows = []
    for rank in ranks:
        bar.set_description(f"{name}: layer {layer} rank {rank}")
        scores, _ = fit_and_score("distance", min(rank, layer_states["train"].shape[-1]), layer_states, splits,
                                  epochs, seed)
        rows += [row(name, layer, rank, "", "rank_sweep", m, scores[m]) for m in ("uuas", "spearman", "epochs")]
        bar.update()
    return rows


def tree_rows(name: str, attentions: Sequence[torch.Tensor], test: list[Sentence], seed: int) -> list[dict[str, Any]]:
    """Per layer and head, the UUAS of the maximum spanning tree of the head's word-level attention; plus the
    best head of each layer."""
    rows = []
    for layer, weights in enumerate(attentions, start=1):
        heads = tree_induction.tree_induction_uuas(weights.float(), test, exclude_punct=True, seed=seed)
        rows += [row(name, layer, "", r["head"], "attention_tree", "uuas", r["uuas"]) for r in heads]
        rows.append(row(name, layer, "", "", "attention_tree", "best_head_uuas", max(r["uuas"] for r in heads)))
    return rows


def baseline_rows(test: list[Sentence], seed: int) -> list[dict[str, Any]]:
    """Hewitt & Manning's LINEAR baseline (the left-to-right chain: distance ``|i - j|``, depth ``i``, scored
    with the probes' own metrics) and a uniformly random tree's UUAS."""
    chain_distance = [np.abs(np.subtract.outer(np.arange(len(s)), np.arange(len(s)))).astype(float) for s in test]
    chain_depth = [np.arange(len(s), dtype=float) for s in test]
    n = max(len(s) for s in test)
    gold_d, gold_h = structural.gold_distances(test, n).numpy(), structural.gold_depths(test, n).numpy()
    gold_d = [gold_d[k, : len(s), : len(s)] for k, s in enumerate(test)]
    gold_h = [gold_h[k, : len(s)] for k, s in enumerate(test)]
    distance = structural.DistanceProbe(1, 1).metrics(chain_distance, gold_d, test, True, (5, 50))
    depth = structural.DepthProbe(1, 1).metrics(chain_depth, gold_h, test, True, (5, 50))
    return [row(BASELINE, "", "", "", "linear_chain", "uuas", distance["uuas"]),
            row(BASELINE, "", "", "", "linear_chain", "spearman", distance["spearman"]),
            row(BASELINE, "", "", "", "linear_chain", "root_acc", depth["root_acc"]),
            row(BASELINE, "", "", "", "linear_chain", "depth_spearman", depth["spearman"]),
            row(BASELINE, "", "", "", "random_tree", "uuas",
                tree_induction.random_tree_uuas(test, num_samples=10, seed=seed, exclude_punct=True))]


def best_layer(rows: Sequence[dict[str, Any]], name: str) -> int:
    """The layer whose distance probe has the highest dev UUAS (the lowest layer on a tie)."""
    dev = {r["layer"]: r["value"] for r in rows if r["model"] == name and r["probe"] == "distance"
           and r["metric"] == "dev_uuas"}
    return max(sorted(dev), key=lambda layer: dev[layer])


# -- outputs ---------------------------------------------------------------------------------------------------

def lookup(rows: Sequence[dict[str, Any]], **where: Any) -> float | None:
    """The value of the one row matching ``where`` (``None`` if there is none)."""
    found = [r["value"] for r in rows if all(r[k] == v for k, v in where.items())]
    return found[0] if found else None


def _cell(value: float | None, percent: bool = False) -> str:
    if value is None:
        return ""
    return f"{100 * value:.1f}" if percent else f"{value:.2f}"


def markdown(rows: Sequence[dict[str, Any]], models: Sequence[str], description: str) -> str:
    """The per-layer table (both models), the baselines and the rank sweep, in the paper's units (UUAS and
    root accuracy in %, Spearman as a fraction)."""
    lines = [f"Data: {description}.", "",
             "| model | layer | UUAS | DSpr. | root% | NSpr. | best head UUAS (attention) | epochs (dist / depth) |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name in models:
        layers = sorted({r["layer"] for r in rows if r["model"] == name and r["probe"] == "distance"})
        for layer in layers:
            get = lambda probe, metric: lookup(rows, model=name, layer=layer, probe=probe, metric=metric)  # noqa: E731
            epochs = f"{get('distance', 'epochs'):.0f} / {get('depth', 'epochs'):.0f}"
            lines.append(f"| {name} | {layer} | {_cell(get('distance', 'uuas'), True)} | "
                         f"{_cell(get('distance', 'spearman'))} | {_cell(get('depth', 'root_acc'), True)} | "
                         f"{_cell(get('depth', 'spearman'))} | {_cell(get('attention_tree', 'best_head_uuas'), True)} | "
                         f"{epochs} |")
    base = lambda probe, metric: lookup(rows, model=BASELINE, probe=probe, metric=metric)  # noqa: E731
    lines.append(f"| LINEAR chain (no training) | | {_cell(base('linear_chain', 'uuas'), True)} | "
                 f"{_cell(base('linear_chain', 'spearman'))} | {_cell(base('linear_chain', 'root_acc'), True)} | "
                 f"{_cell(base('linear_chain', 'depth_spearman'))} | | |")
    lines.append(f"| random tree | | {_cell(base('random_tree', 'uuas'), True)} | | | | | |")
    sweep = [r for r in rows if r["probe"] == "rank_sweep"]
    if sweep:
        layer = sweep[0]["layer"]
        lines += ["", f"Distance-probe rank sweep, {sweep[0]['model']} layer {layer} (best dev UUAS):", "",
                  "| rank | UUAS | DSpr. | epochs |", "|---:|---:|---:|---:|"]
        for rank in dict.fromkeys(r["rank"] for r in sweep):
            get = lambda metric: lookup(sweep, rank=rank, metric=metric)  # noqa: E731
            lines.append(f"| {rank} | {_cell(get('uuas'), True)} | {_cell(get('spearman'))} | {get('epochs'):.0f} |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], models: Sequence[str], path: Path) -> Path:
    """Three panels: UUAS per layer (probe and best attention head), Spearman per layer (distance and depth),
    and the rank sweep; pretrained solid, control dashed, baselines grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    colours = {"distance": "C0", "depth": "C1", "attention_tree": "C2"}
    for name in models:
        style = "-" if name != CONTROL else "--"
        per_layer = lambda probe, metric: sorted(  # noqa: E731
            (r["layer"], r["value"]) for r in rows if r["model"] == name and r["probe"] == probe and r["metric"] == metric)
        for probe, metric, label in (("distance", "uuas", "distance probe"),
                                     ("attention_tree", "best_head_uuas", "best attention head")):
            points = per_layer(probe, metric)
            axes[0].plot(*zip(*points), style, marker="o", ms=3, color=colours[probe], label=f"{label} ({name})")
        for probe in ("distance", "depth"):
            points = per_layer(probe, "spearman")
            axes[1].plot(*zip(*points), style, marker="o", ms=3, color=colours[probe], label=f"{probe} ({name})")
    base = {m: lookup(rows, model=BASELINE, probe=p, metric=m) for p, m in (("linear_chain", "uuas"),)}
    axes[0].axhline(base["uuas"], color="grey", ls=":", lw=1, label="LINEAR chain")
    axes[0].axhline(lookup(rows, model=BASELINE, probe="random_tree", metric="uuas"), color="grey", ls="-.", lw=1,
                    label="random tree")
    axes[0].set(title="UUAS (PUD test)", xlabel="layer (0 = embeddings)", ylabel="UUAS")
    axes[1].set(title="Spearman (distance, depth)", xlabel="layer (0 = embeddings)", ylabel="Spearman")
    sweep = [r for r in rows if r["probe"] == "rank_sweep"]
    if sweep:
        for metric, colour in (("uuas", "C0"), ("spearman", "C3")):
            points = [(r["rank"], r["value"]) for r in sweep if r["metric"] == metric]
            axes[2].plot(*zip(*points), marker="o", ms=3, color=colour, label=metric)
        axes[2].set_xscale("log", base=2)
        axes[2].set(title=f"rank sweep, layer {sweep[0]['layer']}", xlabel="probe rank")
        axes[2].legend(fontsize=7)
    for ax in axes[:2]:
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def write_outputs(rows: Sequence[dict[str, Any]], models: Sequence[str], description: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / OUTPUTS[0], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (out / OUTPUTS[1]).write_text(markdown(rows, models, description))
    return [out / OUTPUTS[0], out / OUTPUTS[1], plot(rows, models, out / OUTPUTS[2])]


# -- command ---------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="output folder (must be empty or new unless --overwrite)")
    p.add_argument("--model", default="all-MiniLM-L6-v2",
                   help="an installed model name (structattn.hf.local_model) or a local HF model directory")
    p.add_argument("--train-treebank", default=str(EWT_DEV), help="CoNLL-U file cut 90/10 into train/dev, or 'pud'")
    p.add_argument("--train-limit", type=int, default=None, help="first N sentences of the train treebank")
    p.add_argument("--dev-limit", type=int, default=None, help="first N dev sentences (after the cut)")
    p.add_argument("--test-limit", type=int, default=None, help="first N test sentences")
    p.add_argument("--ranks", default=",".join(map(str, RANKS)), help="rank sweep ('' to skip)")
    p.add_argument("--epochs", type=int, default=40, help="the most epochs per probe (early stopping on dev)")
    p.add_argument("--no-control", dest="control", action="store_false", help="skip the random-weight control")
    p.add_argument("--no-trees", dest="trees", action="store_false", help="skip trees from attention")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def load_model(name: str) -> tuple[Any, Any]:
    from transformers import AutoTokenizer

    from structattn.hf import local_model
    from structattn.hf.loading import from_pretrained

    path = Path(name) if Path(name).is_dir() else local_model(name)
    return from_pretrained(path).eval(), AutoTokenizer.from_pretrained(str(path))


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Everything the command does; returns the rows of the CSV."""
    from structattn.experiments.probe_command import random_control
    from structattn.progress import progress_disabled

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise ValueError(f"{out} is not empty; pass --overwrite to write into it")
    ranks = [int(r) for r in args.ranks.split(",") if r.strip()]
    if args.epochs < 1 or any(r < 1 for r in ranks):
        raise ValueError(f"--epochs and every --ranks value must be >= 1, got {args.epochs} and {ranks}")
    torch.set_num_threads(args.threads)
    quiet = progress_disabled(args.quiet)
    train, dev, test, description = load_splits(args.train_treebank, args.seed, args.train_limit, args.test_limit,
                                              args.dev_limit)
    splits = {"train": train, "dev": dev, "test": test}
    model, tokenizer = load_model(args.model)
    name = Path(args.model).name
    models = {name: model, **({CONTROL: random_control(model, args.seed)} if args.control else {})}
    layers = model.config.num_hidden_layers + 1
    bar = tqdm(total=len(models) * (2 * layers + 1) + len(ranks), disable=quiet, desc="probe_minilm")
    rows = baseline_rows(test, args.seed)
    for label, encoder in models.items():
        bar.set_description(f"{label}: encoding")
        states, attentions = {}, []
        for split, sentences in splits.items():
            states[split], kept = encode_states(encoder, tokenizer, sentences, split == "test" and args.trees)
            attentions = kept or attentions
        bar.update()
        rows += probe_layers(label, states, splits, args.epochs, args.seed, bar)
        if args.trees:
            bar.set_description(f"{label}: trees from attention")
            rows += tree_rows(label, attentions, test, args.seed)
        if label == name and ranks:
            rows += rank_sweep(name, best_layer(rows, name), states, splits, ranks, args.epochs, args.seed, bar)
    bar.close()
    write_outputs(rows, list(models), description, out)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    rows = run(args)
    out = Path(args.out)
    print((out / OUTPUTS[1]).read_text())
    print(f"wrote {out}/: {', '.join(OUTPUTS)} ({len(rows)} rows, {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
