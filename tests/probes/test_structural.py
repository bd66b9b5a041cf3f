"""Structural probes: metrics on literal cases, exact recovery on tree-shaped hidden states, training, errors."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from structattn.probes.structural import (
    DepthProbe,
    DistanceProbe,
    evaluate,
    fit_probe,
    gold_depths,
    gold_distances,
    reference_gold_edges,
)
from structattn.probes.tree_induction import random_tree_uuas, spanning_tree, tree_edges
from structattn.structures import Sentence
from tests.structures.oracles import dependency_graph, distances_from_graph, random_heads
from tests.threads import one_thread  # noqa: F401  (autouse fixture)


def make_sentences(count: int, rng: random.Random, lo: int = 5, hi: int = 10, prefix: str = "s") -> list[Sentence]:
    out = []
    for k in range(count):
        n = rng.randint(lo, hi)
        out.append(Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, rng), upos=["X"] * n, id=f"{prefix}{k}"))
    return out


def path_vectors(sentences: list[Sentence], n: int) -> torch.Tensor:
    """x_i = sum of one-hots of i's ancestors-or-self minus the root: ||x_i - x_j||^2 = d(i, j), ||x_i||^2 = depth."""
    x = torch.zeros(len(sentences), n, n, dtype=torch.float64)
    for k, s in enumerate(sentences):
        for i in range(len(s)):
            a = i
            while s.heads[a] != -1:
                x[k, i, a] = 1.0
                a = s.heads[a]
    return x


def padded_mask(sentences: list[Sentence], n: int) -> torch.Tensor:
    return torch.arange(n)[None, :] < torch.tensor([len(s) for s in sentences])[:, None]


def tiny() -> Sentence:
    # 0 <- 1 (root) -> 2 -> 3: edges (0,1), (1,2), (2,3); depths 1, 0, 1, 2
    return Sentence(["a", "b", "c", "d"], heads=[1, -1, 1, 2], upos=["X"] * 4, id="tiny")


# -- gold targets --------------------------------------------------------------------------------------------
def test_gold_distances_and_depths_match_networkx():
    rng = random.Random(1)
    sentences = make_sentences(6, rng, 2, 9)
    dist, depth = gold_distances(sentences, 11), gold_depths(sentences, 11)
    assert dist.shape == (6, 11, 11) and depth.shape == (6, 11)
    for k, s in enumerate(sentences):
        ref = distances_from_graph(dependency_graph(s), len(s))
        np.testing.assert_array_equal(dist[k, : len(s), : len(s)].numpy(), ref)
        np.testing.assert_array_equal(depth[k, : len(s)].numpy(), ref[:, s.heads.index(-1)])
        assert (dist[k, len(s):] == -1).all() and (depth[k, len(s):] == -1).all()


def test_mst_of_gold_distances_is_the_gold_tree():
    rng = random.Random(2)
    for s in make_sentences(40, rng, 2, 25):
        assert spanning_tree(gold_distances([s], len(s))[0].numpy()) == tree_edges(s.heads)


# -- literal cases -------------------------------------------------------------------------------------------
def test_distance_metrics_on_a_literal_case():
    s = tiny()
    pred = np.array([[0, 1, 3, 2], [1, 0, 2, 4], [3, 2, 0, 5], [2, 4, 5, 0]], dtype=float)
    gold = gold_distances([s], 4)[0].numpy().astype(float)
    out = DistanceProbe(2, 2).metrics([pred], [gold], [s], exclude_punct=False, length_range=(1, 50))
    # MST by hand: (0,1)=1, (0,3)=2, (1,2)=2 -> 2 of the 3 gold edges
    assert out["uuas"] == pytest.approx(2 / 3)
    # per-row rho by hand: 0.8, 3/sqrt(10), 2/sqrt(10), 0.2
    assert out["spearman"] == pytest.approx((1 + 5 / math.sqrt(10)) / 4)
    assert out["spearman_sentences"] == 1.0
    # default length range 5..50 excludes this 4-word sentence
    assert math.isnan(DistanceProbe(2, 2).metrics([pred], [gold], [s], False, (5, 50))["spearman"])


def test_depth_metrics_on_a_literal_case():
    s = tiny()
    gold = gold_depths([s], 4)[0].numpy().astype(float)
    wrong = np.array([0.5, 0.7, 2.0, 3.0])  # shallowest is word 0, the root is word 1
    right = np.array([0.9, 0.1, 2.0, 3.0])
    out = DepthProbe(2, 2).metrics([wrong, right], [gold, gold], [s, s], False, (1, 50))
    assert out["root_acc"] == 0.5
    # rho(wrong) = 2/sqrt(10) (ranks 1,2,3,4 vs 2.5,1,2.5,4); rho(right) = 3/sqrt(10) (ranks 2,1,3,4)
    assert out["spearman"] == pytest.approx((2 + 3) / math.sqrt(10) / 2)


def test_losses_on_a_literal_case():
    s = tiny()
    mask = torch.ones(1, 4, dtype=torch.bool)
    pred = torch.tensor([[[0, 1, 3, 2], [1, 0, 2, 4], [3, 2, 0, 5], [2, 4, 5, 0]]], dtype=torch.float32)
    # |pred - d| sums to 18 over the 16 pairs
    assert DistanceProbe(2, 2).loss(pred, gold_distances([s], 4), mask).item() == pytest.approx(18 / 16)
    depth_pred = torch.tensor([[0.5, 0.7, 2.0, 3.0]])
    assert DepthProbe(2, 2).loss(depth_pred, gold_depths([s], 4), mask).item() == pytest.approx(3.2 / 4)


def test_punctuation_is_left_out_of_decoding_and_root_choice():
    s = Sentence(["a", "b", "c", "."], heads=[1, -1, 1, 1], upos=["X", "X", "X", "PUNCT"], id="p")
    gold = gold_distances([s], 4)[0].numpy().astype(float)
    pred = gold.copy()
    pred[0, 3] = pred[3, 0] = 0.1  # would pull the full stop onto word 0
    probe = DistanceProbe(2, 2)
    assert probe.metrics([pred], [gold], [s], True, (1, 50))["uuas"] == 1.0  # 2 gold edges without punct
    assert probe.metrics([pred], [gold], [s], False, (1, 50))["uuas"] == pytest.approx(2 / 3)
    depth = np.array([1.0, 0.5, 1.0, 0.0])  # the full stop is shallowest
    assert DepthProbe(2, 2).metrics([depth], [depth], [s], True, (1, 50))["root_acc"] == 1.0
    assert DepthProbe(2, 2).metrics([depth], [depth], [s], False, (1, 50))["root_acc"] == 0.0


# -- exact and trained recovery ------------------------------------------------------------------------------
def test_exact_probe_on_tree_shaped_states_scores_perfectly():
    sentences = make_sentences(12, random.Random(3), 5, 9)
    hidden, mask = path_vectors(sentences, 9), padded_mask(sentences, 9)
    for cls, key in ((DistanceProbe, "uuas"), (DepthProbe, "root_acc")):
        probe = cls(9, 9).double()
        with torch.no_grad():
            probe.proj.copy_(torch.eye(9))
        out = evaluate(probe, hidden, mask, sentences)
        assert out[key] == 1.0 and out["spearman"] == 1.0 and out["loss"] == 0.0


def rotated_tree_states(seed: int):
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    sentences = make_sentences(48, rng, 5, 10)
    n, dim = 10, 12
    x = torch.nn.functional.pad(path_vectors(sentences, n), (0, dim - n))
    q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
    return sentences, (x @ q.T).float(), padded_mask(sentences, n)


def linear_tree_states(seed: int, count: int = 240):
    """``count`` sentences whose states are a random rotation of :func:`path_vectors` (width 12)."""
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    sentences = make_sentences(count, rng, 5, 10)
    n, dim = 10, 12
    x = torch.nn.functional.pad(path_vectors(sentences, n), (0, dim - n))
    q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
    return sentences, (x @ q.T).float(), padded_mask(sentences, n)


@pytest.mark.parametrize("cls, key", [(DistanceProbe, "uuas"), (DepthProbe, "root_acc")])
def test_training_converges_and_stops_early_on_a_linearly_embedded_tree(cls, key):
    """States that are a linear image of the tree: the paper's schedule (dev split, lr / 10 on a plateau, stop
    after ``patience`` epochs without improvement) reaches a perfect score well before the epoch maximum."""
    sentences, hidden, mask = linear_tree_states(4)
    train, test = slice(0, 200), slice(200, 240)
    probe = cls(12, 12)
    curve = fit_probe(probe, hidden[train], mask[train], sentences[train], epochs=200, lr=0.01, progress=False)
    out = evaluate(probe, hidden[test], mask[test], sentences[test])
    assert out[key] >= 0.99 and out["spearman"] > 0.9, out
    assert curve.stopped_early and curve.epochs_run < 200
    # stopped exactly `patience` (5) epochs after the last improvement, none of which improved by 1e-4
    assert curve.epochs_run == curve.best_epoch + 1 + 5
    best = curve.dev_loss[curve.best_epoch]
    assert all(d > best - 1e-4 for d in curve.dev_loss[curve.best_epoch + 1:])
    assert min(curve.dev_loss) > best - 1e-4 and best < 0.02 < curve.dev_loss[0]
    # the learning rate only ever drops, by a factor 10, and only after an epoch that did not improve
    assert curve.lr[0] == 0.01 and curve.lr[-1] < 0.01
    for e in range(1, curve.epochs_run):
        if curve.lr[e] != curve.lr[e - 1]:
            assert curve.lr[e] == pytest.approx(curve.lr[e - 1] / 10)
            assert curve.dev_loss[e - 1] >= min(curve.dev_loss[: e - 1]) * (1 - 1e-4)


def test_probe_holds_its_best_dev_epoch_and_an_explicit_dev_split_is_used():
    sentences, hidden, mask = linear_tree_states(5, count=80)
    dev = (hidden[60:], mask[60:], sentences[60:])
    probe = DistanceProbe(12, 6)
    curve = fit_probe(probe, hidden[:60], mask[:60], sentences[:60], epochs=12, lr=0.05, dev=dev, progress=False)
    assert len(curve.dev_loss) == len(curve.train_loss) == len(curve.lr) == curve.epochs_run
    # the returned parameters are those of the best dev epoch, whatever came after it
    assert evaluate(probe, *dev)["loss"] == pytest.approx(curve.dev_loss[curve.best_epoch], rel=1e-5)


def test_early_stopping_is_reproducible_with_a_seed():
    sentences, hidden, mask = linear_tree_states(6, count=60)
    runs = []
    for seed in (3, 3, 4):
        probe = DepthProbe(12, 5)
        curve = fit_probe(probe, hidden, mask, sentences, epochs=15, lr=0.02, seed=seed, progress=False)
        runs.append((curve, probe.proj.detach().clone()))
    assert runs[0][0] == runs[1][0] and torch.equal(runs[0][1], runs[1][1])
    assert runs[0][0].dev_loss != runs[2][0].dev_loss and not torch.equal(runs[0][1], runs[2][1])


def test_a_dev_split_needs_sentences_to_spare():
    s = tiny()
    hidden, mask = torch.randn(1, 4, 3), torch.ones(1, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="dev_fraction=0.1 of 1 training sentences"):
        fit_probe(DistanceProbe(3, 2), hidden, mask, [s], progress=False)
    with pytest.raises(ValueError, match="dev_fraction=1.5"):
        fit_probe(DistanceProbe(3, 2), hidden.expand(3, 4, 3), mask.expand(3, 4), [s] * 3, dev_fraction=1.5,
                  progress=False)
    with pytest.raises(ValueError, match="patience"):
        fit_probe(DistanceProbe(3, 2), hidden, mask, [s], patience=0, progress=False)
    curve = fit_probe(DistanceProbe(3, 2), hidden, mask, [s], epochs=3, dev_fraction=0, progress=False)
    assert curve.epochs_run == 3 and curve.dev_loss == [] and not curve.stopped_early


def test_random_states_stay_at_the_random_tree_level():
    rng, gen = random.Random(5), torch.Generator().manual_seed(5)
    sentences = make_sentences(100, rng, 5, 10)
    hidden, mask = torch.randn(100, 10, 12, generator=gen), padded_mask(sentences, 10)
    probe = DistanceProbe(12, 12)
    fit_probe(probe, hidden[:40], mask[:40], sentences[:40], epochs=60, lr=0.05, progress=False)
    held_out = sentences[40:]
    score = evaluate(probe, hidden[40:], mask[40:], held_out, exclude_punct=False)["uuas"]
    chance = random_tree_uuas(held_out, num_samples=20, seed=0)
    assert abs(score - chance) < 0.08, (score, chance)  # sd of the held-out score is about 0.02


# -- training mechanics --------------------------------------------------------------------------------------
def test_fit_is_deterministic_per_seed_and_lowers_the_loss():
    sentences, hidden, mask = rotated_tree_states(6)
    runs = []
    for seed in (0, 0, 1):
        probe = DistanceProbe(12, 4)
        curve = fit_probe(probe, hidden[:16], mask[:16], sentences[:16], epochs=5, lr=0.01, seed=seed, progress=False,
                          batch_size=5, dev_fraction=0)
        runs.append((curve, probe.proj.detach().clone()))
    assert runs[0][0] == runs[1][0] and torch.equal(runs[0][1], runs[1][1])
    assert not torch.equal(runs[0][1], runs[2][1])
    curve = runs[0][0]
    assert curve.train_loss[-1] < curve.train_loss[0]
    assert curve.epochs_run == 5 and curve.dev_loss == [] and curve.best_epoch == 4 and not curve.stopped_early


def test_padding_garbage_changes_nothing():
    sentences, hidden, mask = rotated_tree_states(7)
    sentences, hidden, mask = sentences[:10], hidden[:10], mask[:10]
    garbage = torch.where(mask[:, :, None], hidden, torch.full_like(hidden, 1e4))
    wider = torch.cat([garbage, torch.full((10, 3, 12), -1e4)], dim=1)
    wider_mask = torch.nn.functional.pad(mask, (0, 3), value=False)
    for probe in (DistanceProbe(12, 6), DepthProbe(12, 6)):
        a = evaluate(probe, hidden, mask, sentences)
        b = evaluate(probe, wider, wider_mask, sentences)
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-5), key


# -- errors --------------------------------------------------------------------------------------------------
def test_bad_inputs_name_the_culprit():
    s = tiny()
    probe = DistanceProbe(3, 2)
    hidden, mask = torch.zeros(1, 4, 3), torch.ones(1, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="hidden must be"):
        evaluate(probe, torch.zeros(1, 4, 5), mask, [s])
    with pytest.raises(ValueError, match="'tiny' has 4 words"):
        evaluate(probe, hidden, torch.tensor([[True, True, True, False]]), [s])
    with pytest.raises(ValueError, match="2 gold sentences"):
        evaluate(probe, hidden, mask, [s, s])
    bad = hidden.clone()
    bad[0, 2, 1] = float("nan")
    with pytest.raises(ValueError, match="token 2"):
        fit_probe(probe, bad, mask, [s], epochs=1, progress=False)
    no_upos = Sentence(["a", "b"], heads=[-1, 0], id="bare")
    with pytest.raises(ValueError, match="'bare' has no upos"):
        evaluate(DistanceProbe(3, 2), torch.zeros(1, 2, 3), torch.ones(1, 2, dtype=torch.bool), [no_upos])
    with pytest.raises(ValueError, match="rank"):
        DepthProbe(3, 0)


# -- regressions and reference-code fidelity ------------------------------------------------------------------
def test_constant_predictions_count_as_zero_spearman():
    """Regression: a constant prediction for a 5-50 word sentence made the batched spearmanr return a bare
    scalar NaN, and indexing its diagonal raised IndexError; the docstring says it counts as 0."""
    sentences = make_sentences(3, random.Random(8), 6, 9)
    n = max(len(s) for s in sentences)
    hidden, mask = torch.randn(3, n, 4, generator=torch.Generator().manual_seed(8)), padded_mask(sentences, n)
    for cls in (DistanceProbe, DepthProbe):
        probe = cls(4, 2)
        with torch.no_grad():
            probe.proj.zero_()  # every prediction 0: constant rows and constant depth vectors
        out = evaluate(probe, hidden, mask, sentences)
        assert out["spearman"] == 0.0 and out["spearman_sentences"] == 3.0
    s = tiny()
    gold = gold_distances([s], 4)[0].numpy().astype(float)
    pred = gold.copy()
    pred[2] = 7.0  # one constant row among informative ones: rho 0 for it, 1 for the others
    out = DistanceProbe(2, 2).metrics([pred], [gold], [s], False, (1, 50))
    assert out["spearman"] == pytest.approx(3 / 4)


def reporter_gold_edges(distance: np.ndarray, upos: list[str]) -> set[tuple[int, int]]:
    """A transcription of structural-probes' reporter.prims_matrix_to_edges: pairs of non-punctuation words
    sorted (stably) by distance in row-major order, joined Kruskal-style with a union-find."""
    pairs = {(i, j): distance[i, j] for i in range(len(upos)) for j in range(len(upos))
             if upos[i] != "PUNCT" and upos[j] != "PUNCT"}
    parent = list(range(len(upos)))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    edges = set()
    for (i, j), _ in sorted(pairs.items(), key=lambda x: x[1]):
        if find(i) != find(j):
            parent[find(i)] = find(j)
            edges.add((min(i, j), max(i, j)))
    return edges


def test_gold_uuas_edges_follow_the_reference_code_when_punctuation_has_a_dependent():
    """x ( y ) z with y attached to "(": the tree has no edge between non-punctuation words x and y, but the
    reference code's gold MST over non-punctuation distances links them (d(x, y) = 2)."""
    s = Sentence(["x", "(", "y", ")", "z"], heads=[-1, 0, 1, 1, 0],
                 upos=["X", "PUNCT", "X", "PUNCT", "X"], id="paren")
    gold = gold_distances([s], 5)[0].numpy().astype(float)
    assert reporter_gold_edges(gold, s.upos) == {(0, 4), (0, 2)}
    pred = gold.copy()
    pred[2, 4] = pred[4, 2] = 0.5  # decoded tree over x, y, z: (2,4) then (0,4)
    probe = DistanceProbe(2, 2)
    assert probe.metrics([pred], [gold], [s], True, (1, 50))["uuas"] == 0.5  # (0,4) of {(0,4), (0,2)}
    assert probe.metrics([pred], [gold], [s], True, (1, 50), gold_edges="tree")["uuas"] == 1.0  # {(0,4)} only
    assert probe.metrics([gold], [gold], [s], True, (1, 50))["uuas"] == 1.0
    with pytest.raises(ValueError, match="gold_edges must be one of"):
        probe.metrics([gold], [gold], [s], True, (1, 50), gold_edges="mst")


def test_reference_gold_edges_match_a_transcription_of_the_reference_code():
    rng = random.Random(9)
    for s in make_sentences(40, rng, 2, 14):
        upos = [rng.choice(["X", "X", "PUNCT"]) for _ in range(len(s))]
        s = Sentence(s.words, heads=s.heads, upos=upos, id=s.id)
        gold = gold_distances([s], len(s))[0].numpy().astype(float)
        kept = np.flatnonzero([u != "PUNCT" for u in upos])
        assert reference_gold_edges(gold, kept) == reporter_gold_edges(gold, upos), s.heads
