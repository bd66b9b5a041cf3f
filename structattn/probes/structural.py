"""Structural probes (Hewitt & Manning 2019, "A Structural Probe for Finding Syntax in Word Representations").

On frozen word-level hidden states ``h`` (b, n, d_model) a linear map ``B`` (rank, d_model) is trained so that

* :class:`DistanceProbe`: ``d_B(h_i, h_j) = ||B (h_i - h_j)||^2`` approximates the gold tree distance
  ``d(i, j)`` (hops in the undirected dependency tree); loss (paper, eq. 3) per sentence
  ``sum_{i,j} |d(i, j) - d_B(h_i, h_j)| / n^2``, averaged over sentences;
* :class:`DepthProbe`: ``||B h_i||^2`` approximates the depth of word ``i`` (hops to the root); loss per
  sentence ``sum_i |depth_i - ||B h_i||^2| / n``, averaged over sentences.

Metrics (:func:`evaluate`), as in the paper:

* ``uuas`` (distance): minimum spanning tree of the predicted distances (scipy) vs the gold edges, pooled
  over the corpus. With ``exclude_punct=True`` (the paper's setting, default) words with ``upos == "PUNCT"``
  are dropped before decoding and scoring. The gold edges follow ``gold_edges``:

  - ``"reference"`` (default): as in the paper's code (``structural-probes``, ``reporter.py``,
    ``prims_matrix_to_edges``): the minimum spanning tree of the *gold distances* over the non-punctuation
    words (Kruskal over pairs sorted by distance, ties in row-major order), so every sentence of ``m``
    scored words has ``m - 1`` gold edges. Where a punctuation mark has dependents, the tree edges through
    it are replaced by edges between the words it separated (``a <- ( -> b`` gives the gold edge ``a - b``).
  - ``"tree"``: the gold tree's head-dependent pairs whose both ends are scored (fewer gold edges when
    punctuation has dependents). The two agree whenever punctuation words are leaves.
* ``root_acc`` (depth): the fraction of sentences whose shallowest predicted non-punctuation word is the
  gold root.
* ``spearman``: ``scipy.stats.spearmanr`` between predicted and gold values over all words (punctuation
  included, as in the paper's code): per word against every word (distance; averaged over the words of
  the sentence) or per sentence (depth); averaged over sentences of each length, then macro-averaged over
  lengths in ``length_range`` (``(5, 50)`` inclusive, the paper's range). A constant prediction has no
  defined correlation and counts as 0. ``nan`` when no sentence has a length in range.

Training (:func:`fit_probe`) follows the paper's code (``structural-probes``, ``regimen.py``): Adam at 0.001,
minibatches of 20 sentences, the learning rate divided by 10 whenever the dev loss fails to improve, and a stop
after 5 epochs without a dev improvement of 1e-4 (``epochs`` is a maximum); the probe keeps its best dev
epoch's parameters, and the per-epoch curve comes back as a :class:`FitCurve`.

Glossary: b batch, n tokens (words), d model dim, r probe rank.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

import networkx as nx
import numpy as np
import torch
from einops import einsum
from scipy.stats import spearmanr
from torch import nn

from structattn.progress import progress_bar
from structattn.structures.providers import get_provider
from structattn.structures.sentence import Sentence
from structattn.structures.trees import Edge, probe_loss, punctuation_keep, spanning_tree, tree_edges, uuas


class StructuralProbe(nn.Module):
    """A rank-``rank`` linear map ``B`` (rank, model_dim) read through squared norms; subclasses say which.

    Args:
        model_dim: width of the hidden states.
        rank: rows of ``B`` (the paper uses the full width or less).
    """

    def __init__(self, model_dim: int, rank: int) -> None:
        super().__init__()
        if model_dim < 1 or rank < 1:
            raise ValueError(f"model_dim and rank must be >= 1, got model_dim={model_dim}, rank={rank}")
        self.model_dim, self.rank = model_dim, rank
        self.proj = nn.Parameter(torch.empty(rank, model_dim))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Uniform(-0.05, 0.05) as in the paper's code, from ``generator`` when given."""
        with torch.no_grad():
            values = torch.rand(self.proj.shape, generator=generator, dtype=torch.float32) * 0.1 - 0.05
            self.proj.copy_(values.to(self.proj.device, self.proj.dtype))

    def transform(self, hidden: torch.Tensor) -> torch.Tensor:
        """``B h`` for every token. Shapes: (b, n, d) -> (b, n, r)."""
        return einsum(hidden.to(self.proj.dtype), self.proj, "b n d, r d -> b n r")

    def targets(self, sentences: Sequence[Sentence], n: int) -> torch.Tensor:
        """Gold values padded to ``n`` tokens."""
        raise NotImplementedError

    def loss(self, predicted: torch.Tensor, gold: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        """Length-normalised L1 loss averaged over sentences (see the module docstring)."""
        raise NotImplementedError

    def metrics(
        self,
        predicted: list[np.ndarray],
        gold: list[np.ndarray],
        sentences: Sequence[Sentence],
        exclude_punct: bool,
        length_range: tuple[int, int],
        gold_edges: str = "reference",
    ) -> dict[str, float]:
        """Metrics from per-sentence predictions and gold values, both cropped to each sentence's length
        (``gold_edges``: see the module docstring; distance probes only)."""
        raise NotImplementedError


class DistanceProbe(StructuralProbe):
    """Predicts tree distances as ``||B (h_i - h_j)||^2`` (Hewitt & Manning 2019, eq. 2).

    Shapes:
        forward: hidden (b, n, d) -> squared distances (b, n, n).
    """

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # ||t_i - t_j||^2 = ||t_i||^2 + ||t_j||^2 - 2 t_i . t_j: one batched matmul instead of a (b, n, n, r)
        # difference tensor (r times less memory); clamped at 0 against rounding, diagonal exactly 0.
        t = self.transform(hidden)  # (b, n, r)
        sq = t.pow(2).sum(-1)  # (b, n)
        dist = (sq[:, :, None] + sq[:, None, :] - 2 * einsum(t, t, "b i r, b j r -> b i j")).clamp_min(0)
        eye = torch.eye(t.shape[1], dtype=torch.bool, device=t.device)
        return dist.masked_fill(eye, 0.0)

    def targets(self, sentences: Sequence[Sentence], n: int) -> torch.Tensor:
        return gold_distances(sentences, n)

    def loss(self, predicted: torch.Tensor, gold: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        return probe_loss(predicted, gold, token_mask)

    def metrics(self, predicted, gold, sentences, exclude_punct, length_range, gold_edges="reference"):
        if gold_edges not in GOLD_EDGES:
            raise ValueError(f"gold_edges must be one of {GOLD_EDGES}, got {gold_edges!r}")
        decoded, edges, by_length = [], [], defaultdict(list)
        for pred, true, s in zip(predicted, gold, sentences):
            keep = punctuation_keep(s, exclude_punct)
            idx = np.flatnonzero(keep)
            decoded.append({(int(idx[i]), int(idx[j])) for i, j in spanning_tree(pred[np.ix_(idx, idx)])})
            edges.append(reference_gold_edges(true, idx) if gold_edges == "reference" else tree_edges(s.heads, keep))
            if length_range[0] <= len(s) <= length_range[1]:
                by_length[len(s)].append(float(np.mean(_row_spearman(pred, true))))
        return {"uuas": uuas(decoded, edges), **_macro_spearman(by_length)}


class DepthProbe(StructuralProbe):
    """Predicts tree depth as ``||B h_i||^2`` (Hewitt & Manning 2019, section 2).

    Shapes:
        forward: hidden (b, n, d) -> squared norms (b, n).
    """

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.transform(hidden).pow(2).sum(-1)

    def targets(self, sentences: Sequence[Sentence], n: int) -> torch.Tensor:
        return gold_depths(sentences, n)

    def loss(self, predicted: torch.Tensor, gold: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        err = torch.where(token_mask, (predicted - gold.to(predicted.dtype)).abs(), torch.zeros_like(predicted))
        lengths = token_mask.sum(-1).to(predicted.dtype)
        return (err.sum(-1) / lengths).mean()

    def metrics(self, predicted, gold, sentences, exclude_punct, length_range, gold_edges="reference"):
        correct, by_length = 0, defaultdict(list)
        for pred, true, s in zip(predicted, gold, sentences):
            keep = np.asarray(punctuation_keep(s, exclude_punct))
            candidates = np.flatnonzero(keep) if keep.any() else np.arange(len(s))
            correct += int(candidates[np.argmin(pred[candidates])] == s.heads.index(-1))
            if length_range[0] <= len(s) <= length_range[1]:
                by_length[len(s)].append(_spearman(pred, true))
        return {"root_acc": correct / len(sentences), **_macro_spearman(by_length)}


GOLD_EDGES = ("reference", "tree")


def reference_gold_edges(distance: np.ndarray, kept: np.ndarray) -> set[Edge]:
    """Gold UUAS edges as the reference code computes them: the minimum spanning tree (networkx Kruskal,
    ties in row-major order of the pairs) of the gold distances restricted to the ``kept`` words.

    Shapes:
        distance (n, n) gold hops; kept (m,) word positions. Returns ``m - 1`` edges ``(i, j)``, ``i < j``.
    """
    graph = nx.Graph()
    graph.add_nodes_from(int(i) for i in kept)
    graph.add_weighted_edges_from((int(i), int(j), float(distance[i, j])) for a, i in enumerate(kept) for j in kept[a + 1:])
    return {(min(i, j), max(i, j)) for i, j in nx.minimum_spanning_edges(graph, algorithm="kruskal", data=False)}


def gold_distances(sentences: Sequence[Sentence], n: int) -> torch.Tensor:
    """Tree distances from the ``dependency`` provider, padded with -1 to ``n``. Shapes: (b, n, n) float32."""
    dist = get_provider("dependency").batch(list(sentences)).distance.to(torch.float32)
    extra = n - dist.shape[-1]
    return torch.nn.functional.pad(dist, (0, extra, 0, extra), value=-1.0)


def gold_depths(sentences: Sequence[Sentence], n: int) -> torch.Tensor:
    """Hops from each word to its sentence's root, -1 on padding. Shapes: (b, n) float32."""
    dist = gold_distances(sentences, n)
    roots = torch.tensor([s.heads.index(-1) for s in sentences])
    depth = dist[torch.arange(len(sentences)), :, roots]  # (b, n)
    return depth


@dataclass
class FitCurve:
    """The training curve of :func:`fit_probe`, one entry per epoch run.

    Attributes:
        train_loss: mean training loss of each epoch (over sentences, as the loss is defined).
        dev_loss: mean loss on the dev split after each epoch (empty without a dev split).
        lr: the learning rate each epoch trained with.
        best_epoch: 0-based epoch whose parameters the probe holds on return (the lowest dev loss; the last
            epoch without a dev split).
        stopped_early: ``True`` when training stopped before ``epochs`` for lack of dev improvement.
    """

    train_loss: list[float] = field(default_factory=list)
    dev_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    best_epoch: int = -1
    stopped_early: bool = False

    @property
    def epochs_run(self) -> int:
        return len(self.train_loss)


def fit_probe(
    probe: StructuralProbe,
    hidden: torch.Tensor,
    token_mask: torch.Tensor,
    gold: Sequence[Sentence],
    epochs: int = 40,
    lr: float = 1e-3,
    seed: int = 0,
    progress: bool = True,
    batch_size: int = 20,
    dev_fraction: float = 0.1,
    dev: tuple[torch.Tensor, torch.Tensor, Sequence[Sentence]] | None = None,
    patience: int = 5,
    lr_factor: float = 0.1,
    min_delta: float = 1e-4,
) -> FitCurve:
    """Train ``probe`` on frozen ``hidden`` states until the dev loss stops improving, as the paper's code does.

    The schedule of ``structural-probes`` (``regimen.ProbeRegimen``): Adam at ``lr`` (0.001), minibatches of
    ``batch_size`` (20) sentences; after every epoch the loss on a dev split is measured, the learning rate is
    multiplied by ``lr_factor`` (0.1) as soon as the dev loss fails to improve (``ReduceLROnPlateau`` with
    patience 0), and training stops once ``patience`` (5) epochs in a row have not lowered the best dev loss
    by more than ``min_delta`` (1e-4), or after ``epochs`` (a maximum). The probe is left holding the
    parameters of its best dev epoch.

    The dev split is ``dev`` when given, else a seeded ``dev_fraction`` of the training sentences (held out,
    not trained on); ``dev_fraction=0`` trains for exactly ``epochs`` epochs on everything, without a dev
    split. The probe is re-initialised from ``seed`` (which also draws the dev split and orders the
    minibatches), so a call is deterministic.

    Args:
        probe: a :class:`DistanceProbe` or :class:`DepthProbe`.
        hidden: word-level hidden states (b, n, d); not differentiated through.
        token_mask: (b, n) bool, ``True`` on the first ``len(gold[k])`` tokens of row ``k``.
        gold: the b sentences with gold ``heads``.
        epochs: the most epochs to run; lr, seed, batch_size: as above; ``progress=False`` hides the bar.
        dev_fraction: share of ``gold`` held out as the dev split when ``dev`` is not given.
        dev: an explicit dev split ``(hidden, token_mask, sentences)`` shaped like the training arguments.
        patience, lr_factor, min_delta: the stopping and decay rule above.

    Returns:
        the :class:`FitCurve` (per-epoch train and dev loss, learning rate, best epoch, whether it stopped early).

    Raises:
        ValueError: bad states or masks (named by sentence), ``epochs`` / ``patience`` below 1, or a
            ``dev_fraction`` that leaves no sentence to train on or none to hold out.
    """
    _check_batch(probe, hidden, token_mask, gold)
    _check_schedule(epochs, patience, dev_fraction, lr_factor, len(gold), dev is not None)
    generator = torch.Generator().manual_seed(seed)
    probe.reset_parameters(generator)
    train = _prepared(probe, hidden, token_mask, gold)
    if dev is not None:
        _check_batch(probe, *dev)
        held = _prepared(probe, *dev)
    elif dev_fraction > 0:
        order = torch.randperm(len(gold), generator=generator)
        cut = max(1, round(dev_fraction * len(gold)))
        held, train = _subset(train, order[:cut]), _subset(train, order[cut:])
    else:
        held = None
    optimizer = torch.optim.Adam(probe.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=lr_factor, patience=0)
    curve, best_state = FitCurve(), None
    bar = progress_bar(range(epochs), quiet=not progress, desc=f"fit {type(probe).__name__}", leave=False)
    for epoch in bar:
        curve.lr.append(optimizer.param_groups[0]["lr"])
        curve.train_loss.append(_train_epoch(probe, optimizer, train, batch_size, generator))
        if held is None:
            curve.best_epoch = epoch
            bar.set_postfix(loss=f"{curve.train_loss[-1]:.4f}")
            continue
        curve.dev_loss.append(_mean_loss(probe, held, batch_size))
        bar.set_postfix(loss=f"{curve.train_loss[-1]:.4f}", dev=f"{curve.dev_loss[-1]:.4f}")
        scheduler.step(curve.dev_loss[-1])
        if best_state is None or curve.dev_loss[-1] < curve.dev_loss[curve.best_epoch] - min_delta:
            curve.best_epoch, best_state = epoch, {k: v.detach().clone() for k, v in probe.state_dict().items()}
        elif epoch - curve.best_epoch >= patience:
            curve.stopped_early = epoch + 1 < epochs
            break
    if best_state is not None:
        probe.load_state_dict(best_state)
    return curve


def _check_schedule(epochs: int, patience: int, dev_fraction: float, lr_factor: float, count: int,
                    explicit_dev: bool) -> None:
    if epochs < 1 or patience < 1:
        raise ValueError(f"epochs and patience must be >= 1, got epochs={epochs}, patience={patience}")
    if not 0 < lr_factor <= 1:
        raise ValueError(f"lr_factor must be in (0, 1], got {lr_factor}")
    if explicit_dev or dev_fraction == 0:
        return
    if not 0 < dev_fraction < 1 or count - max(1, round(dev_fraction * count)) < 1:
        raise ValueError(
            f"dev_fraction={dev_fraction} of {count} training sentences leaves none to train on or none to hold "
            "out; pass dev_fraction=0 to train for a fixed number of epochs without a dev split, or dev=(...)"
        )


_Split = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # hidden, token_mask, target, lengths


def _prepared(probe: StructuralProbe, hidden: torch.Tensor, token_mask: torch.Tensor,
              gold: Sequence[Sentence]) -> _Split:
    hidden, token_mask = hidden.detach(), token_mask.bool()
    target = probe.targets(gold, hidden.shape[1]).to(hidden.device)
    return hidden, token_mask, target, token_mask.sum(-1).cpu()


def _subset(split: _Split, rows: torch.Tensor) -> _Split:
    return tuple(t[rows.to(t.device)] for t in split)  # type: ignore[return-value]


def _batch_loss(probe: StructuralProbe, split: _Split, chunk: torch.Tensor) -> torch.Tensor:
    """Loss of the rows ``chunk``, cropped to their longest sentence (the padding beyond it is masked out)."""
    hidden, token_mask, target, lengths = split
    n = int(lengths[chunk].max())
    chunk = chunk.to(hidden.device)
    crop = (slice(None),) + (slice(0, n),) * (target.dim() - 1)
    return probe.loss(probe(hidden[chunk, :n]), target[chunk][crop], token_mask[chunk, :n])


def _train_epoch(probe: StructuralProbe, optimizer: torch.optim.Optimizer, split: _Split, batch_size: int,
                 generator: torch.Generator) -> float:
    total, count = 0.0, len(split[3])
    for chunk in torch.randperm(count, generator=generator).split(batch_size):
        loss = _batch_loss(probe, split, chunk)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(chunk)
    return total / count


@torch.no_grad()
def _mean_loss(probe: StructuralProbe, split: _Split, batch_size: int) -> float:
    count = len(split[3])
    return sum(_batch_loss(probe, split, c).item() * len(c) for c in torch.arange(count).split(batch_size)) / count


@torch.no_grad()
def evaluate(
    probe: StructuralProbe,
    hidden: torch.Tensor,
    token_mask: torch.Tensor,
    gold: Sequence[Sentence],
    exclude_punct: bool = True,
    length_range: tuple[int, int] = (5, 50),
    gold_edges: str = "reference",
) -> dict[str, float]:
    """Loss and the paper's metrics of ``probe`` on ``hidden`` (arguments as in :func:`fit_probe`;
    ``gold_edges`` as in the module docstring).

    Returns:
        ``{"loss", "uuas", "spearman", "spearman_sentences"}`` for a distance probe and
        ``{"loss", "root_acc", "spearman", "spearman_sentences"}`` for a depth probe.
    """
    _check_batch(probe, hidden, token_mask, gold)
    token_mask = token_mask.bool()
    predicted = probe(hidden)
    target = probe.targets(gold, hidden.shape[1]).to(hidden.device)
    loss = probe.loss(predicted, target, token_mask)
    pred, true = (t.to(torch.float64).cpu().numpy() for t in (predicted, target))
    crops = [(k,) + (slice(0, len(s)),) * (pred.ndim - 1) for k, s in enumerate(gold)]  # real tokens of row k
    pred_k, true_k = [pred[c] for c in crops], [true[c] for c in crops]
    return {"loss": float(loss), **probe.metrics(pred_k, true_k, gold, exclude_punct, length_range, gold_edges)}


def _check_batch(probe: StructuralProbe, hidden: torch.Tensor, token_mask: torch.Tensor, gold: Sequence[Sentence]) -> None:
    if hidden.dim() != 3 or hidden.shape[-1] != probe.model_dim:
        raise ValueError(f"hidden must be (b, n, {probe.model_dim}), got shape {tuple(hidden.shape)}")
    if tuple(token_mask.shape) != tuple(hidden.shape[:2]):
        raise ValueError(f"token_mask has shape {tuple(token_mask.shape)}, hidden needs {tuple(hidden.shape[:2])}")
    if len(gold) != hidden.shape[0]:
        raise ValueError(f"{len(gold)} gold sentences for a batch of {hidden.shape[0]} hidden-state rows")
    n = hidden.shape[1]
    mask = token_mask.bool().cpu()
    for k, s in enumerate(gold):
        if s.heads is None:
            raise ValueError(f"sentence {s.id!r} has no heads (a gold tree is needed)")
        if len(s) > n or not bool(mask[k, : len(s)].all()) or bool(mask[k, len(s):].any()):
            raise ValueError(
                f"sentence {s.id!r} has {len(s)} words, but token_mask row {k} marks {int(mask[k].sum())} tokens; "
                "it must mark exactly the first len(sentence) tokens (word-level states, padded at the end)"
            )
        if not torch.isfinite(hidden[k, : len(s)]).all():
            bad = int((~torch.isfinite(hidden[k, : len(s)])).any(-1).nonzero()[0])
            raise ValueError(f"sentence {s.id!r}: hidden state of token {bad} ({s.words[bad]!r}) is not finite")


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho of two vectors; 0 where undefined (constant input)."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(spearmanr(a, b).statistic)


def _row_spearman(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of ``pred`` with the same row of ``true`` (n, n); 0 where undefined.

    One :func:`_spearman` call per row: a batched ``spearmanr(axis=1)`` returns a bare scalar NaN when every
    row is constant, which cannot be indexed per row.
    """
    return np.array([_spearman(p, t) for p, t in zip(pred, true)], dtype=np.float64)


def _macro_spearman(by_length: dict[int, list[float]]) -> dict[str, float]:
    count = sum(len(v) for v in by_length.values())
    if not count:
        return {"spearman": float("nan"), "spearman_sentences": 0.0}
    return {"spearman": float(np.mean([np.mean(v) for v in by_length.values()])), "spearman_sentences": float(count)}
