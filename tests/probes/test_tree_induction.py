"""Tree induction from attention: oracle agreement, forced trees, baselines, padding, literal case, errors."""

from __future__ import annotations

import random
from collections import Counter

import networkx as nx
import numpy as np
import pytest
import torch

from structattn.probes.tree_induction import (
    SCORINGS,
    induce_trees,
    random_tree,
    random_tree_uuas,
    right_branching_uuas,
    spanning_tree,
    tree_edges,
    tree_induction_uuas,
    uuas,
)
from structattn.structures import Sentence
from tests.structures.oracles import random_heads


def make_sentences(count: int, seed: int, lo: int = 3, hi: int = 9) -> list[Sentence]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        n = rng.randint(lo, hi)
        out.append(Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, rng), upos=["X"] * n, id=f"t{k}"))
    return out


def padded(per_sentence: list[torch.Tensor], n: int, fill: float = 0.0) -> torch.Tensor:
    """Stack (h, m, m) matrices into (b, h, n, n), padding with ``fill``."""
    out = torch.full((len(per_sentence), per_sentence[0].shape[0], n, n), fill, dtype=torch.float64)
    for k, w in enumerate(per_sentence):
        m = w.shape[-1]
        out[k, :, :m, :m] = w
    return out


def gold_attention(s: Sentence) -> torch.Tensor:
    """Row-normalised gold adjacency (no self-loops), (m, m)."""
    m = len(s)
    adj = torch.zeros(m, m, dtype=torch.float64)
    for i, h in enumerate(s.heads):
        if h >= 0:
            adj[i, h] = adj[h, i] = 1.0
    return adj / adj.sum(-1, keepdim=True)


def chain_attention(m: int) -> torch.Tensor:
    """Each token attends to the next one (the last to itself)."""
    w = torch.zeros(m, m, dtype=torch.float64)
    w[torch.arange(m - 1), torch.arange(1, m)] = 1.0
    w[m - 1, m - 1] = 1.0
    return w


def test_spanning_tree_agrees_with_networkx():
    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 15):
        w = rng.random((n, n))
        w = w + w.T
        graph = nx.Graph()
        graph.add_weighted_edges_from((i, j, w[i, j]) for i in range(n) for j in range(i + 1, n))
        for maximum, oracle in ((False, nx.minimum_spanning_tree), (True, nx.maximum_spanning_tree)):
            expected = {(min(e), max(e)) for e in oracle(graph).edges()}
            assert spanning_tree(w, maximum=maximum) == expected
    assert spanning_tree(np.zeros((1, 1))) == set()
    assert len(spanning_tree(np.zeros((5, 5)), maximum=True)) == 4  # zeros are edges, not gaps
    with pytest.raises(ValueError, match=r"pair \(0, 2\)"):
        spanning_tree(np.array([[0, 1, np.inf], [1, 0, 1], [np.inf, 1, 0]]))


def test_literal_case():
    # symmetrised weights: (0,1)=0.9+0.1, (0,2)=0.0+0.6, (0,3)=0.1+0.1, (1,2)=0.2+0.2, (1,3)=0.0+0.3, (2,3)=0.5+0.6
    w = torch.tensor([[0.0, 0.9, 0.0, 0.1],
                      [0.1, 0.5, 0.2, 0.0],
                      [0.6, 0.2, 0.0, 0.5],
                      [0.1, 0.3, 0.6, 0.0]], dtype=torch.float64)[None, None]
    trees = induce_trees(w, torch.ones(1, 4, dtype=torch.bool))
    assert trees == [[{(0, 1), (2, 3), (0, 2)}]]  # 1.0, 1.1, then 0.6 joins the two parts
    s = Sentence(["a", "b", "c", "d"], heads=[1, -1, 1, 1], upos=["X"] * 4, id="lit")  # gold (0,1), (1,2), (1,3)
    rows = tree_induction_uuas([w], [s])
    assert rows[0]["uuas"] == pytest.approx(1 / 3)  # only (0,1)
    assert rows[0]["right_branching_baseline"] == pytest.approx(2 / 3)  # chain (0,1),(1,2),(2,3) vs gold


def test_attention_on_the_gold_tree_scores_one_and_chain_scores_the_baseline():
    sentences = make_sentences(12, seed=1)
    n = 10
    gen = torch.Generator().manual_seed(1)
    gold = padded([torch.stack([gold_attention(s)] * 2) for s in sentences], n)
    chain = padded([torch.stack([chain_attention(len(s))] * 2) for s in sentences], n)
    noise = torch.rand(12, 2, n, n, generator=gen, dtype=torch.float64)
    heads_mixed = torch.cat([gold[:, :1], chain[:, 1:]], dim=1)
    rows = tree_induction_uuas([gold, chain, heads_mixed, noise], sentences)
    assert [(r["layer"], r["head"]) for r in rows] == [(l, h) for l in range(4) for h in range(2)]
    by_key = {(r["layer"], r["head"]): r["uuas"] for r in rows}
    baseline = right_branching_uuas(sentences)
    assert by_key[(0, 0)] == by_key[(0, 1)] == by_key[(2, 0)] == 1.0
    assert by_key[(1, 0)] == by_key[(1, 1)] == by_key[(2, 1)] == baseline
    assert all(r["right_branching_baseline"] == baseline for r in rows)
    assert all(r["random_baseline"] == random_tree_uuas(sentences, 10, 0) for r in rows)


def test_padding_is_ignored():
    sentences = make_sentences(5, seed=2)
    gen = torch.Generator().manual_seed(2)
    raw = [torch.rand(3, len(s), len(s), generator=gen, dtype=torch.float64) for s in sentences]
    clean = tree_induction_uuas(padded(raw, 9), sentences)
    dirty = tree_induction_uuas(padded(raw, 12, fill=1e6), sentences)
    assert clean == dirty
    one_by_one = [induce_trees(w[None], torch.ones(1, w.shape[-1], dtype=torch.bool))[0] for w in raw]
    assert induce_trees(padded(raw, 12, fill=1e6), torch.arange(12)[None] < torch.tensor([len(s) for s in sentences])[:, None]) == one_by_one


def test_induced_trees_are_spanning_trees_over_the_kept_tokens():
    gen = torch.Generator().manual_seed(3)
    layers = [torch.rand(2, 3, 6, 6, generator=gen) for _ in range(2)]
    keep = torch.tensor([[True, False, True, True, False, True], [True] * 6])
    trees = induce_trees(layers, keep)
    assert len(trees) == 2 and len(trees[0]) == 2 and len(trees[0][0]) == 3
    for per_layer in trees:
        for k, per_head in enumerate(per_layer):
            nodes = set(torch.nonzero(keep[k]).flatten().tolist())
            for edges in per_head:
                assert nx.is_tree(nx.Graph(list(edges))) and set().union(*edges) == nodes


def test_punctuation_can_be_excluded():
    s = Sentence(["a", ",", "b", "c"], heads=[3, 0, 3, -1], upos=["X", "PUNCT", "X", "X"], id="p")
    w = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    w[0, 0, 0, 3] = w[0, 0, 2, 3] = 1.0  # the two non-punct edges
    w[0, 0, 1, 2] = 1.0  # the comma hangs on the wrong word (gold: word 0)
    assert tree_induction_uuas(w, [s], exclude_punct=True)[0]["uuas"] == 1.0
    assert tree_induction_uuas(w, [s], exclude_punct=False)[0]["uuas"] == pytest.approx(2 / 3)
    assert right_branching_uuas([s], exclude_punct=True) == 0.5  # chain (0,2),(2,3) over kept words; gold (0,3),(2,3)
    assert right_branching_uuas([s], exclude_punct=False) == pytest.approx(2 / 3)  # (0,1),(2,3) of 3
    with pytest.raises(ValueError, match="'bare' has no upos"):
        tree_induction_uuas(w, [Sentence(["a", "b", "c", "d"], heads=[-1, 0, 0, 0], id="bare")], exclude_punct=True)


def test_random_trees_are_uniform_and_seeded():
    rng = random.Random(0)
    counts = Counter(frozenset(random_tree([0, 1, 2, 3], rng)) for _ in range(3200))
    assert len(counts) == 16  # Cayley: 4^2 labelled trees
    assert all(120 < c < 280 for c in counts.values()), counts  # expected 200 each
    assert random_tree([5, 9], rng) == {(5, 9)} and random_tree([4], rng) == set()
    sentences = make_sentences(30, seed=4, lo=4, hi=12)
    assert random_tree_uuas(sentences, 5, seed=3) == random_tree_uuas(sentences, 5, seed=3)
    expected = sum(2 / len(s) * (len(s) - 1) for s in sentences) / sum(len(s) - 1 for s in sentences)
    assert random_tree_uuas(sentences, 200, seed=3) == pytest.approx(expected, abs=0.02)


def test_uuas_and_tree_edges():
    assert tree_edges([1, -1, 1, 2]) == {(0, 1), (1, 2), (2, 3)}
    assert tree_edges([1, -1, 1, 2], keep=[True, True, True, False]) == {(0, 1), (1, 2)}
    assert uuas([{(0, 1)}, {(0, 2), (1, 2)}], [{(0, 1)}, {(0, 1), (1, 2)}]) == pytest.approx(2 / 3)
    assert np.isnan(uuas([set()], [set()]))


def test_bad_inputs_name_the_culprit():
    s = Sentence(["a", "b", "c"], heads=[-1, 0, 0], id="x3")
    w = torch.rand(1, 2, 3, 3)
    with pytest.raises(ValueError, match="b = number of sentences"):
        tree_induction_uuas(w, [s, s])
    with pytest.raises(ValueError, match="'x3' has 3 words"):
        tree_induction_uuas(torch.rand(1, 2, 2, 2), [s])
    with pytest.raises(ValueError, match="'x3': token_mask marks 2"):
        tree_induction_uuas(w, [s], token_mask=torch.tensor([[True, True, False]]))
    with pytest.raises(ValueError, match=r"\(b, h, n, n\)"):
        induce_trees(torch.rand(2, 3, 3), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="token_mask has shape"):
        induce_trees(w, torch.ones(1, 4, dtype=torch.bool))


# -- scorings (item: Raganato & Tiedemann / Mareček & Rosa / Limisiewicz et al.) -----------------------------
#: rows are queries: w[i, j] = how much word i attends to word j.
THREE_WAYS = torch.tensor([[0.0, 6.0, 0.0], [4.0, 0.0, 5.0], [3.0, 2.0, 0.0]], dtype=torch.float64)


def test_the_three_scorings_give_different_hand_computed_trees():
    """symmetric: w + w^T has (0,1)=10, (1,2)=7, (0,2)=3 -> {(0,1), (1,2)}.
    marecek_rosa: s(i,j) = sum_r w[r,i] w[r,j]: s(0,1) = 3*2 = 6, s(0,2) = 4*5 = 20, s(1,2) = 0 -> {(0,1), (0,2)}.
    directed_gold_root, root 0: word 1 takes head 2 (w[1,2]=5 > w[1,0]=4), word 2 takes head 0 (w[2,0]=3 >
    w[2,1]=2; 2 -> 1 -> 2 would be a cycle): total 8 vs 7 (both on 0) and 6 (chain 0-1-2) -> {(0,2), (1,2)}."""
    w = THREE_WAYS[None, None]
    mask = torch.ones(1, 3, dtype=torch.bool)
    assert induce_trees(w, mask, "symmetric")[0][0] == {(0, 1), (1, 2)}
    assert induce_trees(w, mask, "marecek_rosa")[0][0] == {(0, 1), (0, 2)}
    assert induce_trees(w, mask, "directed_gold_root", roots=[0])[0][0] == {(0, 2), (1, 2)}
    # root 2: word 0 -> head 1 (6 > 0), word 1 -> head 2 (5 > 4): {(0,1), (1,2)}
    assert induce_trees(w, mask, "directed_gold_root", roots=[2])[0][0] == {(0, 1), (1, 2)}
    s = Sentence(["a", "b", "c"], heads=[-1, 2, 0], upos=["X"] * 3, id="three")  # gold (0,2), (1,2)
    got = {scoring: tree_induction_uuas(w, [s], scoring=scoring)[0]["uuas"] for scoring in SCORINGS}
    assert got == {"symmetric": 0.5, "marecek_rosa": 0.5, "directed_gold_root": 1.0}


def test_marecek_rosa_sums_over_every_real_query_but_spans_only_kept_words():
    """The full stop (word 3) is left out of the tree, but its attention row still counts in s(i, j)."""
    w = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    w[0, 0, :3, :3] = THREE_WAYS
    w[0, 0, 3, 1] = w[0, 0, 3, 2] = 10.0  # the full stop attends to words 1 and 2: s(1,2) = 100
    keep = torch.tensor([[True, True, True, False]])
    real = torch.ones(1, 4, dtype=torch.bool)
    assert induce_trees(w, keep, "marecek_rosa", query_mask=real)[0][0] == {(0, 2), (1, 2)}
    assert induce_trees(w, keep, "marecek_rosa")[0][0] == {(0, 1), (0, 2)}  # queries default to the kept words
    s = Sentence(["a", "b", "c", "."], heads=[-1, 2, 0, 0], upos=["X", "X", "X", "PUNCT"], id="q")
    assert tree_induction_uuas(w, [s], scoring="marecek_rosa")[0]["uuas"] == 1.0  # gold (0,2), (1,2)


def brute_force_arborescence(w: np.ndarray, root: int) -> set[tuple[int, int]]:
    """Best parent assignment by enumeration: every non-root word picks a head, no cycles."""
    import itertools

    m = len(w)
    others = [i for i in range(m) if i != root]
    best, best_edges = -np.inf, None
    for parents in itertools.product(range(m), repeat=len(others)):
        heads = dict(zip(others, parents))
        if any(i == p for i, p in heads.items()):
            continue
        ok = True
        for i in others:  # walk up: must reach the root within m steps
            a, steps = i, 0
            while a != root and steps <= m:
                a, steps = heads[a], steps + 1
            ok &= a == root
        score = sum(w[i, p] for i, p in heads.items())
        if ok and score > best:
            best, best_edges = score, {(min(i, p), max(i, p)) for i, p in heads.items()}
    return best_edges


def test_directed_scoring_is_the_maximum_arborescence_at_the_gold_root():
    from networkx.algorithms.tree.branchings import ArborescenceIterator

    rng = np.random.default_rng(11)
    for m in (2, 3, 4, 5, 6):
        for _ in range(4):
            w = rng.random((m, m))
            root = int(rng.integers(m))
            got = induce_trees(torch.from_numpy(w)[None, None], torch.ones(1, m, dtype=torch.bool),
                               "directed_gold_root", roots=[root])[0][0]
            assert got == brute_force_arborescence(w, root)
            graph = nx.DiGraph()
            graph.add_weighted_edges_from((j, i, w[i, j]) for i in range(m) for j in range(m) if i != j)
            best = next(t for t in ArborescenceIterator(graph, minimum=False) if t.in_degree(root) == 0)
            assert got == {(min(e), max(e)) for e in best.edges()}


def test_punctuation_is_excluded_by_default_and_unknown_scorings_are_named():
    s = Sentence(["a", ",", "b", "c"], heads=[3, 0, 3, -1], upos=["X", "PUNCT", "X", "X"], id="p")
    w = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    w[0, 0, 0, 3] = w[0, 0, 2, 3] = 1.0
    w[0, 0, 1, 2] = 1.0
    assert tree_induction_uuas(w, [s])[0]["uuas"] == 1.0
    with pytest.raises(ValueError, match="'bare' has no upos"):
        tree_induction_uuas(w, [Sentence(["a", "b", "c", "d"], heads=[-1, 0, 0, 0], id="bare")])
    with pytest.raises(ValueError, match="unknown scoring 'mst'.*marecek_rosa"):
        induce_trees(w, torch.ones(1, 4, dtype=torch.bool), "mst")
    with pytest.raises(ValueError, match="one root per sentence"):
        induce_trees(w, torch.ones(1, 4, dtype=torch.bool), "directed_gold_root")
