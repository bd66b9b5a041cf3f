"""The vectorised distance engine against networkx (tests/structures/oracles.py) and written-out cases."""

from __future__ import annotations

import random
import threading

import networkx as nx
import numpy as np
import pytest
import torch

from structattn.structures import Document, Sentence, get_provider
from structattn.structures import distances as engine
from structattn.structures._util import distance_dtype
from structattn.structures.distances import graph_distances, tree_distances
from tests.structures.oracles import distances_from_graph, random_heads

# sizes on both sides of engine.BITSET_MAX_TOKENS (ancestor bitsets up to 64 tokens, Euler-tour scan beyond)
SIZES = [1, 2, 3, 7, 16, 33, 64, 65, 100]


@pytest.fixture(params=["bitsets", "euler"])
def tree_path(request, monkeypatch) -> str:
    """Run a tree test twice: as shipped, and with the Euler-tour scan forced for every size."""
    if request.param == "euler":
        monkeypatch.setattr(engine, "BITSET_MAX_TOKENS", 0)
    elif engine.BITSET_MAX_TOKENS == 0:
        pytest.skip("numpy < 2.0 has no bitwise_count: the bitset path is off")
    return request.param


def pruefer_heads(n: int, rng: random.Random) -> list[int]:
    """A uniform random labelled tree (deep: depth ~ sqrt(n)), rooted at a random token."""
    if n <= 2:
        return [-1] + [0] * (n - 1)
    tree = nx.from_prufer_sequence([rng.randrange(n) for _ in range(n - 2)])
    heads = [-1] * n
    for child, parent in nx.bfs_predecessors(tree, rng.randrange(n)):
        heads[child] = parent
    return heads


def forest_heads(n: int, rng: random.Random) -> list[int]:
    """Several random trees side by side in one row (several roots)."""
    heads: list[int] = []
    while len(heads) < n:
        size, offset = rng.randint(1, n - len(heads)), len(heads)
        heads += [h + offset if h >= 0 else -1 for h in random_heads(size, rng)]
    return heads


def tree_oracle(heads: list[int], n: int) -> np.ndarray:
    """networkx hops over the real tokens, -1 across trees and on padding up to width n."""
    graph = nx.Graph()
    graph.add_nodes_from(range(len(heads)))
    graph.add_edges_from((i, h) for i, h in enumerate(heads) if h >= 0)
    out = np.full((n, n), -1, dtype=np.int64)
    out[: len(heads), : len(heads)] = distances_from_graph(graph, len(heads))
    return out


def padded(rows: list[list[int]], rng: random.Random, garbage: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Heads (b, n) with large finite garbage on padding, and token_mask (b, n)."""
    n = max(len(h) for h in rows)
    heads = torch.tensor([[rng.randint(-7, 3 * n) if garbage else 0 for _ in range(n)] for _ in rows])
    mask = torch.zeros(len(rows), n, dtype=torch.bool)
    for k, h in enumerate(rows):
        heads[k, : len(h)] = torch.tensor(h)
        mask[k, : len(h)] = True
    return heads, mask


def assert_trees(rows: list[list[int]], rng: random.Random) -> None:
    heads, mask = padded(rows, rng)
    out = tree_distances(heads, mask)
    n = heads.shape[1]
    assert out.shape == (len(rows), n, n) and out.dtype == distance_dtype(n) == torch.int16
    for k, h in enumerate(rows):
        np.testing.assert_array_equal(out[k].numpy(), tree_oracle(h, n), err_msg=f"row {k}, heads {h}")


# ------------------------------------------------------------------ trees


def test_literal_five_word_sentence(tree_path: str) -> None:
    # The cat sat on mats: The->cat, cat->sat, sat root, on->mats, mats->sat
    heads = torch.tensor([[1, 2, -1, 4, 2]])
    expected = torch.tensor(
        [
            [0, 1, 2, 4, 3],
            [1, 0, 1, 3, 2],
            [2, 1, 0, 2, 1],
            [4, 3, 2, 0, 1],
            [3, 2, 1, 1, 0],
        ],
        dtype=torch.int16,
    )
    out = tree_distances(heads, torch.ones(1, 5, dtype=torch.bool))
    assert out.dtype == torch.int16
    assert torch.equal(out[0], expected)


def test_literal_padded_forest_batch(tree_path: str) -> None:
    # row 0: two trees {0 <- 1} and {2 <- 3 <- 4}, then padding with garbage heads; row 1: a 2-chain
    heads = torch.tensor([[-1, 0, -1, 2, 3, 99], [1, -1, 7, -5, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0]], dtype=torch.bool)
    out = tree_distances(heads, mask)
    expected0 = torch.tensor(
        [
            [0, 1, -1, -1, -1, -1],
            [1, 0, -1, -1, -1, -1],
            [-1, -1, 0, 1, 2, -1],
            [-1, -1, 1, 0, 1, -1],
            [-1, -1, 2, 1, 0, -1],
            [-1, -1, -1, -1, -1, -1],
        ],
        dtype=torch.int16,
    )
    expected1 = torch.full((6, 6), -1, dtype=torch.int16)
    expected1[:2, :2] = torch.tensor([[0, 1], [1, 0]])
    assert torch.equal(out[0], expected0)
    assert torch.equal(out[1], expected1)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("make", [random_heads, pruefer_heads, forest_heads], ids=["recursive", "pruefer", "forest"])
def test_random_trees_match_networkx(n: int, make, tree_path: str) -> None:
    rng = random.Random(n * 7 + len(make.__name__))
    assert_trees([make(n, rng) for _ in range(3)], rng)


def test_mixed_lengths_and_shapes_in_one_batch(tree_path: str) -> None:
    rng = random.Random(3)
    rows = [random_heads(n, rng) for n in (1, 5, 80, 17)]
    rows.append([-1] + [0] * 39)  # star
    rows.append([-1] + list(range(69)))  # chain hanging from token 0
    rows.append(list(range(1, 90)) + [-1])  # chain hanging from the last token
    rows.append(forest_heads(50, rng))
    assert_trees(rows, rng)


def test_deep_chains_on_both_paths() -> None:
    rng = random.Random(4)
    for n in (64, 300):  # bitsets, Euler-tour scan
        out = tree_distances(torch.tensor([[-1] + list(range(n - 1))]), torch.ones(1, n, dtype=torch.bool))[0]
        idx = torch.arange(n)
        assert torch.equal(out, (idx[:, None] - idx[None, :]).abs().to(torch.int16))
    assert_trees([pruefer_heads(250, rng)], rng)


def test_padding_not_at_the_end(tree_path: str) -> None:
    # token_mask with holes: real tokens 1, 3, 4 (heads index the padded row)
    heads = torch.tensor([[55, 3, -9, -1, 3]])
    mask = torch.tensor([[0, 1, 0, 1, 1]], dtype=torch.bool)
    out = tree_distances(heads, mask)[0]
    expected = torch.full((5, 5), -1, dtype=torch.int16)
    for (i, j), d in {(1, 1): 0, (3, 3): 0, (4, 4): 0, (1, 3): 1, (3, 4): 1, (1, 4): 2}.items():
        expected[i, j] = expected[j, i] = d
    assert torch.equal(out, expected)


def test_padding_invariance(tree_path: str) -> None:
    rng = random.Random(5)
    rows = [random_heads(n, rng) for n in (9, 30)]
    batched = tree_distances(*padded(rows, rng))
    for k, h in enumerate(rows):
        alone = tree_distances(torch.tensor([h]), torch.ones(1, len(h), dtype=torch.bool))[0]
        assert torch.equal(batched[k, : len(h), : len(h)], alone)


def test_permutation_equivariance(tree_path: str) -> None:
    rng = random.Random(6)
    heads = random_heads(70, rng)
    perm = list(range(70))
    rng.shuffle(perm)  # new position p holds old token perm[p]
    where = {old: new for new, old in enumerate(perm)}
    moved = [where[heads[old]] if heads[old] >= 0 else -1 for old in perm]
    mask = torch.ones(1, 70, dtype=torch.bool)
    a, b = tree_distances(torch.tensor([heads]), mask)[0], tree_distances(torch.tensor([moved]), mask)[0]
    p = torch.tensor(perm)
    assert torch.equal(b, a[p][:, p])


def test_empty_inputs(tree_path: str) -> None:
    assert tree_distances(torch.zeros(0, 4, dtype=torch.long), torch.zeros(0, 4, dtype=torch.bool)).shape == (0, 4, 4)
    assert tree_distances(torch.zeros(2, 0, dtype=torch.long), torch.zeros(2, 0, dtype=torch.bool)).shape == (2, 0, 0)
    only_padding = tree_distances(torch.tensor([[3, 3]]), torch.zeros(1, 2, dtype=torch.bool))
    assert torch.equal(only_padding, torch.full((1, 2, 2), -1, dtype=torch.int16))


def test_other_integer_dtypes_accepted() -> None:
    heads = torch.tensor([[1, 2, -1, 4, 2]], dtype=torch.int32)
    out = tree_distances(heads, torch.ones(1, 5, dtype=torch.bool))
    assert out[0, 0, 3] == 4


def test_workspace_reuse_across_shapes_and_threads() -> None:
    rng = random.Random(7)
    batches = [[random_heads(n, rng) for _ in range(b)] for n, b in ((120, 3), (10, 5), (130, 2), (40, 1))]
    inputs = [padded(rows, rng) for rows in batches]
    first = [tree_distances(*x) for x in inputs]
    engine.release_workspace()
    assert all(torch.equal(tree_distances(*x), y) for x, y in zip(inputs, first))
    results: dict[int, list[torch.Tensor]] = {}

    def work(k: int) -> None:
        results[k] = [tree_distances(*x) for x in inputs[::-1] * 2]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        assert all(torch.equal(a, b) for a, b in zip(results[k], first[::-1] * 2))
    for x, rows in zip(first, batches):  # and the answers are right
        for k, h in enumerate(rows):
            np.testing.assert_array_equal(x[k].numpy(), tree_oracle(h, x.shape[1]))


@pytest.mark.parametrize("dtype", [np.int16, np.int32])
@pytest.mark.parametrize("n", [1, 2, 5, 40])
def test_running_maxima_in_both_dtypes(n: int, dtype) -> None:
    rng = np.random.default_rng(n)
    values = rng.integers(-200, 0, size=(3, n)).astype(dtype)
    square = np.empty((3, n, n), dtype=dtype)
    engine._running_maxima(square, values)
    for k in range(3):
        for i in range(n):
            for j in range(n):
                lo, hi = min(i, j), max(i, j)
                want = np.iinfo(dtype).min if i == j else values[k, lo + 1:hi + 1].max()
                assert square[k, i, j] == want, (k, i, j)


def test_distance_dtype_helper() -> None:
    assert distance_dtype(1) == distance_dtype(32767) == torch.int16
    assert distance_dtype(32768) == torch.int32


# ------------------------------------------------------------------ invalid input


def test_head_out_of_range_names_row_and_token(tree_path: str) -> None:
    heads = torch.tensor([[1, 2, -1, 4, 2], [1, 2, -1, 42, 2]])
    with pytest.raises(ValueError, match=r"batch row 1: token 3 has head 42, which is outside -1\.\.4"):
        tree_distances(heads, torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"batch row 0: token 0 has head -2"):
        tree_distances(torch.tensor([[-2, -1]]), torch.ones(1, 2, dtype=torch.bool))


def test_head_on_padding_rejected(tree_path: str) -> None:
    mask = torch.tensor([[1, 1, 1, 0]], dtype=torch.bool)
    with pytest.raises(ValueError, match=r"batch row 0: token 1 has head 3, which is a padding position"):
        tree_distances(torch.tensor([[-1, 3, 0, 0]]), mask)


@pytest.mark.parametrize(
    "heads, token",
    [([1, 0, -1], 0), ([1, 2, 0], 0), ([-1, 1, 1], 1), ([-1, 0, 3, 4, 2], 2)],
    ids=["two-cycle", "no-root", "self-head", "cycle-beside-a-tree"],
)
def test_cycles_raise_without_hanging(heads: list[int], token: int, tree_path: str) -> None:
    batch = torch.tensor([[-1] + [0] * (len(heads) - 1), heads])
    with pytest.raises(ValueError, match=rf"batch row 1: the heads contain a cycle \(token {token} "):
        tree_distances(batch, torch.ones(2, len(heads), dtype=torch.bool))


def test_long_cycle_raises(tree_path: str) -> None:
    n = 300
    heads = torch.tensor([[(i + 1) % n for i in range(n)]])
    with pytest.raises(ValueError, match="cycle"):
        tree_distances(heads, torch.ones(1, n, dtype=torch.bool))


def test_bad_shapes_rejected() -> None:
    with pytest.raises(ValueError, match="heads must be an integer tensor shaped like token_mask"):
        tree_distances(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="token_mask must be a"):
        tree_distances(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3))
    with pytest.raises(ValueError, match="heads must be an integer"):
        tree_distances(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool))


# ------------------------------------------------------------------ graphs


def random_graph_rows(n_list: list[int], rng: random.Random, directed: bool) -> tuple[list, torch.Tensor, torch.Tensor]:
    graphs, rows = [], []
    for k, n in enumerate(n_list):
        graph = nx.DiGraph() if directed else nx.Graph()
        graph.add_nodes_from(range(n))
        for _ in range(rng.randrange(2 * n + 1)):  # sparse, often disconnected; repeats and self-loops allowed
            s, t = rng.randrange(n), rng.randrange(n)
            graph.add_edge(s, t)
            rows.append((k, s, t))
        graphs.append(graph)
    edge_index = torch.tensor(rows, dtype=torch.long).T.reshape(3, -1)
    mask = torch.arange(max(n_list))[None, :] < torch.tensor(n_list)[:, None]
    return graphs, edge_index, mask


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_random_graphs_match_networkx(directed: bool, seed: int) -> None:
    rng = random.Random(seed)
    n_list = [rng.randint(1, 40) for _ in range(4)] + [70]
    graphs, edge_index, mask = random_graph_rows(n_list, rng, directed)
    out = graph_distances(edge_index, mask, directed=directed)
    width = mask.shape[1]
    assert out.shape == (len(n_list), width, width) and out.dtype == torch.int16
    for k, (graph, n) in enumerate(zip(graphs, n_list)):
        want = np.full((width, width), -1, dtype=np.int64)
        want[:n, :n] = distances_from_graph(graph, n)
        np.testing.assert_array_equal(out[k].numpy(), want, err_msg=f"graph {k}")


def test_graph_literal_directed_and_undirected() -> None:
    # 0 -> 1 -> 2, 3 -> 2, token 4 isolated, then one padding position
    edge_index = torch.tensor([[0, 0, 0], [0, 1, 3], [1, 2, 2]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    directed = torch.tensor(
        [
            [0, 1, 2, -1, -1, -1],
            [-1, 0, 1, -1, -1, -1],
            [-1, -1, 0, -1, -1, -1],
            [-1, -1, 1, 0, -1, -1],
            [-1, -1, -1, -1, 0, -1],
            [-1, -1, -1, -1, -1, -1],
        ],
        dtype=torch.int16,
    )
    undirected = torch.tensor(
        [
            [0, 1, 2, 3, -1, -1],
            [1, 0, 1, 2, -1, -1],
            [2, 1, 0, 1, -1, -1],
            [3, 2, 1, 0, -1, -1],
            [-1, -1, -1, -1, 0, -1],
            [-1, -1, -1, -1, -1, -1],
        ],
        dtype=torch.int16,
    )
    assert torch.equal(graph_distances(edge_index, mask, directed=True)[0], directed)
    assert torch.equal(graph_distances(edge_index, mask)[0], undirected)


def test_graph_without_edges_and_tree_agreement() -> None:
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    out = graph_distances(torch.zeros(3, 0, dtype=torch.long), mask)
    assert torch.equal(out.diagonal(dim1=1, dim2=2), torch.tensor([[0, 0, -1], [0, 0, 0]], dtype=torch.int16))
    assert int((out >= 0).sum()) == 5
    rng = random.Random(8)
    rows = [random_heads(n, rng) for n in (12, 75)]
    heads, token_mask = padded(rows, rng)
    edges = torch.tensor([(k, i, h) for k, r in enumerate(rows) for i, h in enumerate(r) if h >= 0]).T
    assert torch.equal(graph_distances(edges, token_mask), tree_distances(heads, token_mask))


def test_bad_edges_name_the_edge() -> None:
    mask = torch.tensor([[1, 1, 1, 0]], dtype=torch.bool)
    with pytest.raises(ValueError, match=r"edge 1 \(batch row 0: 2 -> 3\) is onto a padding position"):
        graph_distances(torch.tensor([[0, 0], [0, 2], [1, 3]]), mask)
    with pytest.raises(ValueError, match=r"edge 0 \(batch row 5: 0 -> 1\) is outside the batch"):
        graph_distances(torch.tensor([[5], [0], [1]]), mask)
    with pytest.raises(ValueError, match=r"edge_index must be a \(3, E\)"):
        graph_distances(torch.zeros(2, 4, dtype=torch.long), mask)


# ------------------------------------------------------------------ through the providers


@pytest.mark.parametrize("seed", range(2))
def test_dependency_provider_matches_networkx(seed: int) -> None:
    rng = random.Random(100 + seed)
    sentences = [
        Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, rng), id=f"s{k}")
        for k, n in enumerate([1, 6, 70, 23])
    ]
    provider = get_provider("dependency")
    for s in sentences:
        np.testing.assert_array_equal(provider(s).distance.numpy(), tree_oracle(s.heads, len(s)))
    batched = provider.batch(sentences).distance
    for k, s in enumerate(sentences):
        np.testing.assert_array_equal(batched[k].numpy(), tree_oracle(s.heads, batched.shape[1]))


def test_dependency_provider_on_a_document_is_a_forest() -> None:
    rng = random.Random(9)
    parts = [Sentence([f"w{i}" for i in range(n)], heads=random_heads(n, rng), id=f"p{n}") for n in (4, 7, 3)]
    distance = get_provider("dependency")(Document(parts, id="doc")).distance
    heads = [h + off if h >= 0 else -1 for s, off in zip(parts, (0, 4, 11)) for h in s.heads]
    np.testing.assert_array_equal(distance.numpy(), tree_oracle(heads, 14))
    assert distance[0, 5] == -1 and distance[5, 0] == -1
