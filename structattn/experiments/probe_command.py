"""``structattn probe``: per-layer structural probes and per-head attention trees of a Hugging Face encoder
or of a structattn checkpoint.

    structattn probe MODEL_DIR_OR_CHECKPOINT --treebank FILE.conllu --out DIR
        [--probes structural_distance,structural_depth,tree_induction] [--layers all] [--no-control] [--limit N]

For each layer of MODEL (a local HF directory with its tokenizer, plain or saved by an attached model; or a
``best.pt`` / ``last.pt`` of ``structattn train`` / ``compare``, see :mod:`structattn.experiments.probe_checkpoint`)
and, with ``--control`` (default), of the same architecture with random weights:

* ``structural_distance`` / ``structural_depth``: Hewitt & Manning probes (``structattn.probes.structural``)
  fit on the frozen states of the train split (each word read at its first sub-token; layer 0 is the
  embedding output, layer l the output of layer l) and scored on the held-out split: ``uuas``, ``spearman``
  / ``root_acc``, ``spearman`` (punctuation excluded from decoding, as in the paper).
* ``tree_induction``: maximum spanning trees of each head's word-level attention on the held-out split
  (``structattn.probes.tree_induction``; attention pooled from sub-words by summing a word's pieces as keys
  and averaging them as queries, Clark et al. 2019; layer l is the attention inside layer l, 1-based),
  punctuation excluded, with the random-tree and right-branching baselines.

Writes ``probe.csv`` (``model,layer,head,probe,metric,value``), ``probe.md`` and ``probe.png``.
The same numbers come from :func:`probe_model` (HF) or
:func:`~structattn.experiments.probe_checkpoint.probe_checkpoint` in Python.
"""

from __future__ import annotations

import copy
import csv
import random
from pathlib import Path
from typing import Any, Sequence

import torch

from structattn.hf.attach import CONFIG_KEY, attach
from structattn.hf.collator import StructureCollator
from structattn.hf.families import max_tokens
from structattn.hf.interface import eager_attention
from structattn.hf.pooling import first_piece_states, piece_matrix, word_attention
from structattn.experiments.probe_options import PROBES
from structattn.probes import structural, tree_induction
from structattn.probes.stacking import chunks, pad_cat
from structattn.progress import progress_bar
from structattn.structures.sentence import Sentence

COLUMNS = ("model", "layer", "head", "probe", "metric", "value")
_METRICS = {"structural_distance": ("uuas", "spearman"), "structural_depth": ("root_acc", "spearman")}


def probe_model(
    model: Any,
    tokenizer: Any,
    sentences: Sequence[Sentence],
    probes: Sequence[str] = PROBES,
    layers: Sequence[int] | None = None,
    name: str = "model",
    test_fraction: float = 0.25,
    epochs: int = 30,
    seed: int = 0,
    batch_size: int = 16,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Probe ``model`` (an HF encoder, attached or not) on ``sentences``; rows with the columns of ``probe.csv``.

    Args:
        layers: layers to probe (``None``: all; 0 is the embeddings, for the structural probes only).
        test_fraction: share of sentences held out (seeded shuffle) for scoring.
        epochs, seed: probe training (``structural.fit_probe``).

    Raises:
        ValueError: an unknown probe, too few sentences for a split, or a sentence the tokenizer cannot
            align (named by the collator).
    """
    check_probes(probes)
    train, test = split(sentences, test_fraction, seed)
    states, attentions = encode(model, tokenizer, train + test, batch_size, progress)
    return probe_encoded(states, attentions, train, test, probes, layers, name, epochs, seed, progress)


def check_probes(probes: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the probes that are not in :data:`PROBES`."""
    unknown = sorted(set(probes) - set(PROBES))
    if unknown:
        raise ValueError(f"unknown probes {unknown}; choose from {list(PROBES)}")


def probe_encoded(states: Sequence[torch.Tensor], attentions: Sequence[torch.Tensor], train: list[Sentence],
                  test: list[Sentence], probes: Sequence[str], layers: Sequence[int] | None, name: str,
                  epochs: int, seed: int, progress: bool) -> list[dict[str, Any]]:
    """The rows of :func:`probe_model` from encoded ``train + test`` (any encoder: HF or structattn).

    Shapes:
        states[l] (s, w, d) for l = 0 (embeddings) .. L; attentions[l - 1] (s, h, w, w) for layer l = 1 .. L;
        s = len(train) + len(test), train first.
    """
    num_layers = len(states) - 1
    chosen = list(range(num_layers + 1)) if layers is None else list(layers)
    bad = [l for l in chosen if not 0 <= l <= num_layers]
    if bad:
        raise ValueError(f"layers {bad} outside 0..{num_layers} ({num_layers} layers; 0 is the embeddings)")
    rows: list[dict[str, Any]] = []
    for layer in progress_bar(chosen, quiet=not progress, desc=f"probe {name}"):
        for probe in (p for p in probes if p in _METRICS):
            rows += _structural(probe, states[layer], train, test, layer, name, epochs, seed)
        if "tree_induction" in probes and layer >= 1:
            rows += _trees(attentions[layer - 1][len(train):], test, layer, name, seed)
    return rows


def split(sentences: Sequence[Sentence], test_fraction: float, seed: int) -> tuple[list[Sentence], list[Sentence]]:
    """A seeded shuffle cut into (train, held-out test)."""
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    cut = len(order) - max(1, round(test_fraction * len(order)))
    if not 0 < test_fraction < 1 or cut < 1:
        raise ValueError(f"need 0 < test_fraction < 1 and at least 2 sentences; got {test_fraction}, {len(sentences)}")
    return [sentences[i] for i in order[:cut]], [sentences[i] for i in order[cut:]]


@torch.no_grad()
def encode(model: Any, tokenizer: Any, sentences: Sequence[Sentence], batch_size: int = 16,
           progress: bool = True) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Word-level states per layer (embeddings first) and word-level attention per layer, end-padded.

    Shapes:
        returns states[l] (s, w, d) and attentions[l] (s, h, w, w), s sentences, w their most words.
    """
    collator = StructureCollator(tokenizer, providers=_providers(model), max_length=max_tokens(model, tokenizer))
    states: list[list[torch.Tensor]] = []
    attentions: list[list[torch.Tensor]] = []
    training = model.training
    with eager_attention(model):
        model.eval()
        for chunk in progress_bar(list(chunks(sentences, batch_size)), quiet=not progress, desc="encode", leave=False):
            encoded = collator.encode(chunk)
            out = model.base_model(**encoded.batch, output_hidden_states=True, output_attentions=True)
            pieces = piece_matrix(encoded.word_ids, encoded.batch["input_ids"].shape[1])
            states.append([first_piece_states(h, pieces) for h in out.hidden_states])
            attentions.append([word_attention(a, pieces) for a in out.attentions])
    model.train(training)
    return [pad_cat([s[l] for s in states]) for l in range(len(states[0]))], \
        [pad_cat([a[l] for a in attentions]) for l in range(len(attentions[0]))]


def random_control(model: Any, seed: int = 0) -> Any:
    """The same architecture (and attention plan) with freshly initialised weights."""
    config = copy.deepcopy(model.config)
    saved = getattr(config, CONFIG_KEY, None)
    if saved:
        delattr(config, CONFIG_KEY)
    torch.manual_seed(seed)
    control = type(model)(config).eval()
    if saved:
        attach(control, saved["plan"], structure_fields=saved.get("structure_fields"))
    return control


def _structural(probe: str, states: torch.Tensor, train: list[Sentence], test: list[Sentence], layer: int,
                name: str, epochs: int, seed: int) -> list[dict[str, Any]]:
    cls = structural.DistanceProbe if probe == "structural_distance" else structural.DepthProbe
    fitted = cls(states.shape[-1], rank=states.shape[-1])
    mask = _word_mask(train + test, states.shape[1])
    k = len(train)
    structural.fit_probe(fitted, states[:k], mask[:k], train, epochs=epochs, seed=seed, progress=False)
    scores = structural.evaluate(fitted, states[k:], mask[k:], test)
    return [_row(name, layer, "", probe, m, scores[m]) for m in _METRICS[probe]]


def _trees(attention: torch.Tensor, test: list[Sentence], layer: int, name: str, seed: int) -> list[dict[str, Any]]:
    rows = tree_induction.tree_induction_uuas(attention, test, exclude_punct=True, seed=seed)
    out = [_row(name, layer, r["head"], "tree_induction", "uuas", r["uuas"]) for r in rows]
    out.append(_row(name, layer, "", "tree_induction", "best_head_uuas", max(r["uuas"] for r in rows)))
    for base in ("random_baseline", "right_branching_baseline"):
        out.append(_row(name, layer, "", "tree_induction", base, rows[0][base]))
    return out


def _row(name: str, layer: int, head: int | str, probe: str, metric: str, value: float) -> dict[str, Any]:
    return {"model": name, "layer": layer, "head": head, "probe": probe, "metric": metric, "value": float(value)}


def _word_mask(sentences: Sequence[Sentence], words: int) -> torch.Tensor:
    return torch.arange(words)[None, :] < torch.tensor([len(s) for s in sentences])[:, None]


def _providers(model: Any) -> dict[str, str]:
    saved = getattr(model.config, CONFIG_KEY, None) or {}
    return {name: name for name in saved.get("structure_fields", {})}


# -- outputs ---------------------------------------------------------------------------------------------------

def write_outputs(rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """``probe.csv``, ``probe.md`` and ``probe.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "probe.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (out / "probe.md").write_text(markdown(rows))
    return [out / "probe.csv", out / "probe.md", plot(rows, out / "probe.png")]


def _layer_table(rows: Sequence[dict[str, Any]]) -> tuple[list[str], dict[tuple[str, int], dict[str, float]]]:
    """Layer-level metrics (head-level rows dropped) as columns ``probe:metric``, keyed by (model, layer)."""
    columns: list[str] = []
    table: dict[tuple[str, int], dict[str, float]] = {}
    for r in rows:
        if r["head"] != "":
            continue
        column = f"{r['probe'].replace('structural_', '')}:{r['metric']}"
        if column not in columns:
            columns.append(column)
        table.setdefault((r["model"], r["layer"]), {})[column] = r["value"]
    return columns, table


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """One row per model and layer, one column per layer-level metric."""
    columns, table = _layer_table(rows)
    lines = ["| model | layer | " + " | ".join(columns) + " |", "|---|---:|" + "---:|" * len(columns)]
    for (name, layer), values in table.items():
        cells = [f"{values[c]:.3f}" if c in values else "" for c in columns]
        lines.append(f"| {name} | {layer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """One panel per layer-level metric, value against layer, one line per model (baselines dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    columns, table = _layer_table(rows)
    shown = [c for c in columns if "baseline" not in c]
    fig, axes = plt.subplots(1, len(shown), figsize=(3.6 * len(shown), 3.2), squeeze=False)
    for ax, column in zip(axes[0], shown):
        for name in dict.fromkeys(m for m, _ in table):
            points = sorted((layer, v[column]) for (m, layer), v in table.items() if m == name and column in v)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        if column.startswith("tree_induction"):
            for base, style in (("random_baseline", ":"), ("right_branching_baseline", "--")):
                values = [v[f"tree_induction:{base}"] for v in table.values() if f"tree_induction:{base}" in v]
                if values:
                    ax.axhline(values[0], color="grey", ls=style, lw=1, label=base.replace("_", " "))
        ax.set_title(column)
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if column.startswith("tree_induction") or ax is axes[0][0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
