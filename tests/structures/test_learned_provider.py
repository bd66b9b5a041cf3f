"""The parser-free ``learned_dependency`` provider: a distance predictor trained on trees, decoded by MST."""

from __future__ import annotations

import importlib
import random
import sys

import networkx as nx
import numpy as np
import pytest
import torch

from structattn.experiments.run import make_providers
from structattn.probes.tree_induction import random_tree_uuas, right_branching_uuas
from structattn.structures import Document, GrammarGenerator, Sentence, collate, get_provider, provider_names
from structattn.structures.providers.base import PROVIDERS

# The package is imported by a fixture, not at collection: importing it registers "learned_dependency",
# and tests/structures/test_providers.py parametrises its contract test over the providers registered when
# it is collected (that contract needs no options; this provider needs a model file). The fixture removes
# the registration again when this module is done.
learned = None


@pytest.fixture(autouse=True, scope="module")
def registered():
    global learned
    learned = importlib.import_module("structattn.structures.learned")
    yield
    PROVIDERS._entries.pop("learned_dependency", None)
    for name in [m for m in sys.modules if m.startswith("structattn.structures.learned")]:
        del sys.modules[name]  # a later import registers the provider again


TINY = dict(embedding_dim=16, hidden_dim=24, num_layers=1, rank=16, dropout=0.1)


def config():
    return learned.PredictorConfig(**TINY)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def grammar() -> dict[str, list[Sentence]]:
    train = GrammarGenerator(seed=1).sentences(240)
    test = GrammarGenerator(seed=2).sentences(60)
    return {"train": train, "test": test}


@pytest.fixture(scope="module")
def trained(registered, grammar):
    model, _ = learned.train_predictor(grammar["train"], config(), epochs=8, lr=1e-2, seed=0, min_freq=1)
    return model


@pytest.fixture(scope="module")
def saved(trained, tmp_path_factory) -> str:
    return str(trained.save(tmp_path_factory.mktemp("learned") / "predictor.pt"))


def test_registered():
    assert "learned_dependency" in provider_names()


def test_learns_well_above_random_trees(trained, grammar):
    score = learned.evaluate_uuas(trained, grammar["test"])
    random_baseline = random_tree_uuas(grammar["test"], num_samples=5)
    chain = right_branching_uuas(grammar["test"])
    print(f"held-out UUAS {score:.3f}, random trees {random_baseline:.3f}, right-branching chain {chain:.3f}")
    assert score > random_baseline + 0.3
    assert score > chain


def test_outputs_are_trees_equal_to_dependency_on_decoded_heads(saved, grammar):
    provider = get_provider("learned_dependency", path=saved)
    sentences = grammar["test"][:12]
    heads = learned.predicted_heads(provider.model, sentences)
    for sentence, h in zip(sentences, heads):
        structure = provider(sentence)
        n = len(sentence)
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from((i, j) for i, j in zip(*np.nonzero(structure.adjacency.numpy())) if i != j)
        assert nx.is_tree(graph), sentence.id
        expected = get_provider("dependency")(Sentence(list(sentence.words), heads=h))
        assert torch.equal(structure.distance, expected.distance)
        assert torch.equal(structure.adjacency, expected.adjacency)
        oracle = dict(nx.all_pairs_shortest_path_length(graph))
        assert all(int(structure.distance[i, j]) == oracle[i][j] for i in range(n) for j in range(n))


def test_batch_equals_collated_singles_and_ignores_gold_heads(saved, grammar):
    provider = get_provider("learned_dependency", path=saved)
    sentences = grammar["test"][:7]
    batch = provider.batch(sentences)
    singles = collate([provider(s) for s in sentences])
    assert torch.equal(batch.distance, singles.distance) and torch.equal(batch.token_mask, singles.token_mask)
    words_only = [Sentence(list(s.words), id=s.id) for s in sentences]
    assert torch.equal(provider.batch(words_only).distance, batch.distance)
    assert batch.source == "learned_dependency" and batch.ids == [s.id for s in sentences]


def test_document_is_a_forest_of_sentence_trees(saved, grammar):
    provider = get_provider("learned_dependency", path=saved)
    a, b = grammar["test"][:2]
    doc = provider(Document([a, b], id="d1"))
    na = len(a)
    assert torch.equal(doc.distance[:na, :na], provider(a).distance)
    assert torch.equal(doc.distance[na:, na:], provider(b).distance)
    assert (doc.distance[:na, na:] == -1).all()


def test_save_load_round_trip(trained, saved, grammar):
    loaded = learned.DistancePredictor.load(saved)
    words = [s.words for s in grammar["test"][:5]]
    for x, y in zip(trained.predict(words), loaded.predict(words)):
        assert torch.equal(x, y)
    assert loaded.config == config() and loaded.features.tables == trained.features.tables


def test_missing_or_bad_model_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope.pt"
    with pytest.raises(ValueError, match=r"nope\.pt' does not exist"):
        get_provider("learned_dependency", path=missing)
    bad = tmp_path / "bad.pt"
    torch.save({"format": "something else"}, bad)
    with pytest.raises(ValueError, match="is not a saved distance predictor"):
        get_provider("learned_dependency", path=bad)


def test_options_name_the_model_file_content(saved, trained, tmp_path):
    first = get_provider("learned_dependency", path=saved).options()
    copy = trained.save(tmp_path / "copy.pt")
    assert get_provider("learned_dependency", path=copy).options()["sha256"] == first["sha256"]
    assert first["path"] == saved and len(first["sha256"]) == 64


def test_training_is_deterministic_given_the_seed(grammar):
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    runs = [learned.train_predictor(grammar["train"][:40], config(), epochs=2, seed=s, min_freq=1)[0] for s in (5, 5, 6)]
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is left alone
    same = runs[0].state_dict(), runs[1].state_dict()
    assert all(torch.equal(same[0][k], same[1][k]) for k in same[0])
    assert not torch.equal(runs[0].proj.weight, runs[2].proj.weight)


def test_dev_selection_keeps_the_best_epoch(grammar):
    model, history = learned.train_predictor(grammar["train"][:60], config(), epochs=3, seed=0, min_freq=1, dev=grammar["test"][:20])
    assert [r["epoch"] for r in history] == [1, 2, 3]
    assert learned.evaluate_uuas(model, grammar["test"][:20]) == pytest.approx(max(r["dev_uuas"] for r in history))


def test_training_leaves_the_busy_cores_alone(grammar, monkeypatch):
    """On a 2-core machine with one core busy the predictor trains on one thread (two made it 20x slower
    there), threads=N wins, a bad count is refused, and the caller's count comes back."""
    import os

    from structattn.structures.learned import predictor

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (1.1, 1.0, 1.0))
    seen, forward = [], predictor.DistancePredictor.forward
    monkeypatch.setattr(predictor.DistancePredictor, "forward",
                        lambda self, *a: (seen.append(torch.get_num_threads()), forward(self, *a))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        learned.train_predictor(grammar["train"][:8], config(), epochs=1, min_freq=1)
        assert set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        learned.train_predictor(grammar["train"][:8], config(), epochs=1, min_freq=1, threads=2)
        assert set(seen) == {2}
        with pytest.raises(ValueError, match="threads must be a whole number >= 1 or None, got 0"):
            learned.train_predictor(grammar["train"][:8], config(), epochs=1, threads=0)
    finally:
        torch.set_num_threads(before)


def test_training_rejects_sentences_without_trees():
    with pytest.raises(ValueError, match="sentence 'x1' has no heads"):
        learned.train_predictor([Sentence(["a", "b"], id="x1")], config(), epochs=1)


def test_compare_machinery_builds_it_from_a_spec(saved):
    providers = make_providers({"pred"}, {"pred": f"learned_dependency(path={saved!r})"})
    assert providers["pred"].options()["path"] == saved


def test_mst_heads_literal_chain():
    # a chain 0-1-2-3 with distances |i - j|: the MST is the chain, rooted at a centre word (1 or 2)
    d = np.abs(np.subtract.outer(np.arange(4), np.arange(4))).astype(float)
    heads = learned.mst_heads(d)
    assert learned.tree_uuas([heads], [[1, 2, 3, -1]]) == 1.0 and heads.count(-1) == 1
    assert learned.mst_heads(np.zeros((1, 1))) == [-1]


def test_mst_heads_matches_networkx_on_random_matrices():
    rng = random.Random(0)
    for n in (2, 3, 7, 19):
        w = np.array([[rng.random() for _ in range(n)] for _ in range(n)])
        w = w + w.T
        heads = learned.mst_heads(w)
        graph = nx.Graph()
        graph.add_weighted_edges_from((i, j, w[i, j]) for i in range(n) for j in range(i + 1, n))
        oracle = {(min(i, j), max(i, j)) for i, j in nx.minimum_spanning_edges(graph, data=False)}
        assert {(min(i, h), max(i, h)) for i, h in enumerate(heads) if h >= 0} == oracle


def test_mst_heads_rejects_bad_input():
    with pytest.raises(ValueError, match=r"pair \(0, 2\) is nan"):
        learned.mst_heads(np.array([[0, 1, np.nan], [1, 0, 1], [np.nan, 1, 0]]))
    with pytest.raises(ValueError, match="square"):
        learned.mst_heads(np.zeros((2, 3)))
