"""Corrupted trees are still trees and exactly the asked share of heads changes."""

import networkx as nx
import pytest

from structattn.seq2seq.corrupt import corrupt_heads
from structattn.structures import GrammarGenerator, Sentence


@pytest.mark.parametrize("rate", [0.1, 0.2, 0.4])
def test_rate_is_exact_and_trees_stay_trees(rate):
    gold = GrammarGenerator(seed=2).sentences(60)
    noisy = corrupt_heads(gold, rate, seed=7)
    total = sum(len(s) - 1 for s in gold)
    changed = sum(a != b for g, c in zip(gold, noisy) for a, b in zip(g.heads, c.heads))
    assert changed == round(rate * total)
    for s in noisy:
        assert s.heads.count(-1) == 1
        graph = nx.DiGraph([(h, i) for i, h in enumerate(s.heads) if h != -1])
        graph.add_nodes_from(range(len(s)))
        assert nx.is_arborescence(graph)
    assert gold[0].heads != noisy[0].heads or gold[1].heads != noisy[1].heads or changed > 0


def test_same_seed_same_noise_and_zero_rate_keeps_trees():
    gold = GrammarGenerator(seed=2).sentences(20)
    assert [s.heads for s in corrupt_heads(gold, 0.2, 1)] == [s.heads for s in corrupt_heads(gold, 0.2, 1)]
    assert [s.heads for s in corrupt_heads(gold, 0.0, 1)] == [s.heads for s in gold]


def test_bad_rate_and_impossible_requests_fail():
    with pytest.raises(ValueError, match="rate"):
        corrupt_heads([], 1.5, 0)
    two = [Sentence(words=["a", "b"], heads=[1, -1], id="x")]  # "a" can attach only to "b": cannot move
    with pytest.raises(ValueError, match="can take another head"):
        corrupt_heads(two, 1.0, 0)
