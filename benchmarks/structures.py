"""Benchmark: batched tree and graph distances against networkx, scipy and the naive per-pair walk.

    python benchmarks/structures.py                # full run (about a minute on 2 busy cores)
    python benchmarks/structures.py --quick        # sizes 16, 64, 256 and 2 rounds, a smoke test
    python benchmarks/structures.py --threads 2    # let torch use two threads (default 1; wall clock then)

Everything runs in one process, timed side by side. Each round times every item of every method once
(interleaved), and a method's figure sums each item's best round. Our engine
(:func:`structattn.structures.distances.tree_distances`) gets whole padded batches, one item per batch (a
single batch is timed 3 times back to back per round, so that it runs warm like the baselines' items, each of
which follows another); the baselines get one sentence at a time, as they would be used:

* networkx: ``dict(all_pairs_shortest_path_length(Graph))``, graph construction included;
* scipy: ``scipy.sparse.csgraph.shortest_path(unweighted=True)`` on a CSR adjacency, construction included;
* naive: for every pair, climb from the deeper token until both meet (pure Python), depths included.

The clock is the process's CPU time (user + sys, so page faults count) while everything is single-threaded:
the machine this was written on is shared, and wall time there measures the neighbours. The garbage collector
is off while timing (as in ``timeit``). Converting a baseline's answer to a matrix and building our padded
``(b, n)`` heads tensor are not timed (the latter is printed once for the treebank); every timed answer is
asserted equal to ours. Baselines run on a prefix of each batch when n is large; per-sentence figures divide
by the number of sentences each method processed.

Provider paths (the table ``--paths`` prints alone): the bundled treebank through the public API, as a user
calls it: ``collate([provider(s) for s in batch])`` per batch of ``--batch`` sentences (the README tour's
per-sentence call), ``provider.batch(batch)`` in file order and in length-sorted batches, against networkx
per sentence (graph built from the heads / enhanced edges, then all pairs). Validation, list -> tensor
conversion, the adjacency and ``collate`` are all timed; every matrix is asserted equal to networkx's.
Targets (issue 6): per-sentence >= 5x networkx, batched >= 15x networkx for ``dependency``.

Random trees: ``recursive`` hangs each token under a uniformly chosen earlier token of a random permutation
(random recursive trees: shallow, depth ~ e ln n, like natural-language trees); ``pruefer`` decodes a uniform
random Prüfer sequence (uniform random labelled trees: deep, depth ~ sqrt(n)). The treebank rows use the
bundled UD Czech PUD (1000 sentences) in padded batches of ``--batch``, in file order and sorted by length.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from itertools import chain

import networkx as nx
import numpy as np
import scipy
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import shortest_path

from structattn.structures.distances import graph_distances, tree_distances

SIZES = (16, 32, 64, 128, 256, 512)
#: sentences per round for networkx / scipy and for the naive walk, by n (ours always gets the full batch)
BASELINE_SENTENCES = {16: 64, 32: 64, 64: 32, 128: 12, 256: 4, 512: 2}
NAIVE_SENTENCES = {16: 16, 32: 8, 64: 2, 128: 1, 256: 1, 512: 1}
TARGET_NETWORKX, TARGET_SCIPY = 60.0, 10.0


# ---------------------------------------------------------------- random trees and graphs

def recursive_tree(n: int, rng: np.random.Generator) -> list[int]:
    """Random recursive tree: token ``order[k]`` hangs under ``order[uniform(0, k)]``."""
    order = rng.permutation(n)
    heads = [-1] * n
    for k in range(1, n):
        heads[order[k]] = int(order[rng.integers(k)])
    return heads


def pruefer_tree(n: int, rng: np.random.Generator) -> list[int]:
    """Uniform random labelled tree (networkx decodes a random Prüfer sequence), rooted at a random token."""
    if n <= 2:
        return [-1] + [0] * (n - 1)
    tree = nx.from_prufer_sequence(rng.integers(n, size=n - 2).tolist())
    heads = [-1] * n
    for child, parent in nx.bfs_predecessors(tree, int(rng.integers(n))):
        heads[child] = parent
    return heads


GENERATORS = {"recursive": recursive_tree, "pruefer": pruefer_tree}


def tree_depth(heads: list[int]) -> int:
    depth = [-1] * len(heads)

    def walk(i: int) -> int:
        path = []
        while i != -1 and depth[i] < 0:
            path.append(i)
            i = heads[i]
        d = -1 if i == -1 else depth[i]
        for j in reversed(path):
            d += 1
            depth[j] = d
        return d

    return max(walk(i) for i in range(len(heads)))


def pad_batch(trees: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Heads (b, n) with padding garbage 0 and token_mask (b, n), filled from one flat array."""
    lengths = np.fromiter(map(len, trees), dtype=np.int64, count=len(trees))
    mask = np.arange(lengths.max()) < lengths[:, None]
    heads = np.zeros(mask.shape, dtype=np.int64)
    heads[mask] = np.fromiter(chain.from_iterable(trees), dtype=np.int64, count=int(lengths.sum()))
    return torch.from_numpy(heads), torch.from_numpy(mask)


# ---------------------------------------------------------------- baselines (one sentence each)

def run_networkx(heads: list[int]) -> dict:
    graph = nx.Graph()
    graph.add_nodes_from(range(len(heads)))
    graph.add_edges_from((i, h) for i, h in enumerate(heads) if h >= 0)
    return dict(nx.all_pairs_shortest_path_length(graph))


def run_scipy(heads: list[int]) -> np.ndarray:
    n = len(heads)
    child = np.array([i for i, h in enumerate(heads) if h >= 0], dtype=np.int64)
    parent = np.array([h for h in heads if h >= 0], dtype=np.int64)
    adjacency = sp.csr_matrix((np.ones(len(child)), (child, parent)), shape=(n, n))
    return shortest_path(adjacency, directed=False, unweighted=True)


def run_naive(heads: list[int]) -> list[list[int]]:
    """Walk-to-root per pair: lift the deeper token, then both, until they meet."""
    n = len(heads)
    depth = []
    for i in range(n):
        d, j = 0, heads[i]
        while j != -1:
            d, j = d + 1, heads[j]
        depth.append(d)
    out = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            a, b, hops = i, j, 0
            while depth[a] > depth[b]:
                a, hops = heads[a], hops + 1
            while depth[b] > depth[a]:
                b, hops = heads[b], hops + 1
            while a != b:
                a, b, hops = heads[a], heads[b], hops + 2
            out[i][j] = out[j][i] = hops
    return out


def as_matrix(answer: object, n: int) -> np.ndarray:
    """A baseline's answer as an (n, n) int matrix with -1 for unreachable (not timed)."""
    if isinstance(answer, dict):
        out = np.full((n, n), -1, dtype=np.int64)
        for i, row in answer.items():
            out[i, list(row.keys())] = list(row.values())
        return out
    out = np.asarray(answer, dtype=np.float64)
    return np.where(np.isinf(out), -1, out).astype(np.int64)


# ---------------------------------------------------------------- timing

#: The clock: CPU time of this process (user + sys, page faults included) while everything runs on one
#: thread, so that other load on a shared machine does not count; wall time when torch may use more threads.
CLOCK: Callable[[], float] = time.process_time
REPEAT_OURS = 3


def side_by_side(methods: dict[str, list[Callable[[], object]]], rounds: dict[str, int],
                 repeat: dict[str, int] | None = None) -> tuple[dict, dict]:
    """Time every item of every method ``repeat[name]`` times (default 1) per round, interleaved; a method's
    time is the sum over its items of each item's best. Also returns each method's last answers."""
    repeat = repeat or {}
    best = {name: [math.inf] * len(items) for name, items in methods.items()}
    answers: dict[str, list[object]] = {}
    gc.collect()
    gc.disable()
    try:
        for r in range(max(rounds.values())):
            for name, items in methods.items():
                if r >= rounds[name]:
                    continue
                answers[name] = []
                for k, item in enumerate(items):
                    for _ in range(repeat.get(name, 1)):
                        start = CLOCK()
                        answer = item()
                        best[name][k] = min(best[name][k], CLOCK() - start)
                    answers[name].append(answer)
    finally:
        gc.enable()
    return {name: sum(times) for name, times in best.items()}, answers


def compare_trees(trees: list[list[int]], n_baseline: int, n_naive: int, rounds: int) -> dict[str, float]:
    """Per-sentence seconds of every method on ``trees``; asserts every answer equals ours."""
    heads, mask = pad_batch(trees)
    tree_distances(heads, mask)  # warm-up: builds the workspace
    base, naive = trees[:n_baseline], trees[:n_naive]
    methods = {
        "ours": [partial(tree_distances, heads, mask)],
        "networkx": [partial(run_networkx, h) for h in base],
        "scipy": [partial(run_scipy, h) for h in base],
        "naive": [partial(run_naive, h) for h in naive],
    }
    naive_rounds = 1 if len(naive[0]) >= 128 else rounds
    seconds, answers = side_by_side(methods, {"ours": rounds, "networkx": rounds, "scipy": rounds, "naive": naive_rounds},
                                    {"ours": REPEAT_OURS})
    ours = answers["ours"][0].numpy()
    for name, subset in (("networkx", base), ("scipy", base), ("naive", naive)):
        for k, (h, answer) in enumerate(zip(subset, answers[name])):
            m = len(h)
            if not np.array_equal(as_matrix(answer, m), ours[k, :m, :m]):
                raise AssertionError(f"{name} disagrees with tree_distances on sentence {k} (n={m})")
    counts = {"ours": len(trees), "networkx": len(base), "scipy": len(base), "naive": len(naive)}
    return {name: seconds[name] / counts[name] for name in seconds}


def compare_graphs(n: int, batch: int, directed: bool, rounds: int, rng: np.random.Generator) -> dict[str, float]:
    """graph_distances vs networkx on random sparse graphs (2n random edges, may be disconnected)."""
    edges = [rng.integers(n, size=(2 * n, 2)).tolist() for _ in range(batch)]
    rows = [(k, s, t) for k, es in enumerate(edges) for s, t in es]
    edge_index = torch.tensor(rows, dtype=torch.long).T.contiguous()
    mask = torch.ones(batch, n, dtype=torch.bool)
    subset = edges[: BASELINE_SENTENCES[n]]

    def run_graph(es: list[list[int]]) -> dict:
        graph = nx.DiGraph() if directed else nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(map(tuple, es))
        return dict(nx.all_pairs_shortest_path_length(graph))

    methods = {"ours": [partial(graph_distances, edge_index, mask, directed)],
               "networkx": [partial(run_graph, es) for es in subset]}
    seconds, answers = side_by_side(methods, {"ours": rounds, "networkx": rounds}, {"ours": REPEAT_OURS})
    for k, answer in enumerate(answers["networkx"]):
        if not np.array_equal(as_matrix(answer, n), answers["ours"][0][k].numpy()):
            raise AssertionError(f"networkx disagrees with graph_distances on graph {k} (n={n}, directed={directed})")
    return {"ours": seconds["ours"] / batch, "networkx": seconds["networkx"] / len(subset)}


# ---------------------------------------------------------------- report

def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}" if seconds < 1e-3 else f"{seconds * 1e6:,.0f}"


def tree_row(label: str, n: str, depth: str, t: dict[str, float]) -> str:
    ratios = [f"{t[name] / t['ours']:,.0f}x" for name in ("networkx", "scipy", "naive")]
    return f"| {label} | {n} | {depth} | {us(t['ours'])} | {us(t['networkx'])} | {us(t['scipy'])} | {us(t['naive'])} | " + " | ".join(ratios) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1: the baselines use one core)")
    parser.add_argument("--batch", type=int, default=64, help="sentences per padded batch for our engine")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (best round is reported)")
    parser.add_argument("--quick", action="store_true", help="sizes 16, 64, 256 and 2 rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paths", action="store_true", help="only the provider-path table on the treebank")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    global CLOCK
    CLOCK = time.process_time if args.threads == 1 else time.perf_counter
    rounds = 2 if args.quick else args.rounds
    sizes = (16, 64, 256) if args.quick else SIZES
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()

    print(f"# structattn distance benchmark: python {platform.python_version()}, torch {torch.__version__}, "
          f"numpy {np.__version__}, scipy {scipy.__version__}, networkx {nx.__version__}")
    clock = "process CPU time" if CLOCK is time.process_time else "wall time"
    print(f"# torch threads {torch.get_num_threads()}, batch {args.batch}, {clock}, best of {rounds} interleaved rounds "
          f"per item, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs\n")
    if args.paths:
        provider_paths(args.batch, rounds, quick=args.quick)
        return 0
    print("| trees | n | max depth (mean) | ours µs/sentence | networkx µs | scipy µs | naive µs | vs networkx | vs scipy | vs naive |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    missed = []
    for label, make in GENERATORS.items():
        for n in sizes:
            trees = [make(n, rng) for _ in range(args.batch)]
            t = compare_trees(trees, BASELINE_SENTENCES[n], NAIVE_SENTENCES[n], rounds)
            depth = f"{np.mean([tree_depth(h) for h in trees]):.1f}"
            print(tree_row(label, str(n), depth, t), flush=True)
            if 32 <= n <= 512 and (t["networkx"] / t["ours"] < TARGET_NETWORKX or t["scipy"] / t["ours"] < TARGET_SCIPY):
                missed.append(f"{label} n={n}")
    treebank_rows(args.batch, rounds)
    provider_paths(args.batch, rounds, quick=args.quick)
    graph_table(sizes, args.batch, rounds, rng)
    verdict = "met at every n in 32..512" if not missed else "MISSED at " + ", ".join(missed)
    print(f"\nTarget (>= {TARGET_NETWORKX:.0f}x networkx and >= {TARGET_SCIPY:.0f}x scipy per sentence): {verdict}.")
    print(f"Total benchmark time {time.perf_counter() - started:.0f} s.")
    return 0


def treebank_rows(batch: int, rounds: int) -> None:
    """The bundled treebank in padded batches: in file order, and sorted by length (less padding)."""
    from structattn.structures.readers import load_bundled

    trees = [s.heads for s in load_bundled()]
    by_length = sorted(range(len(trees)), key=lambda k: len(trees[k]))
    orders = {"file order": list(range(len(trees))), "length-sorted batches": by_length}
    methods = {label: [partial(tree_distances, *pad_batch([trees[k] for k in order[start:start + batch]]))
                       for start in range(0, len(order), batch)] for label, order in orders.items()}
    methods.update({"networkx": [partial(run_networkx, h) for h in trees],
                    "scipy": [partial(run_scipy, h) for h in trees],
                    "naive": [partial(run_naive, h) for h in trees]})
    seconds, answers = side_by_side(methods, {**{label: rounds for label in orders},
                                              "networkx": rounds, "scipy": rounds, "naive": 1})
    for label, order in orders.items():
        ours_by_tree = dict(zip(order, (m for out in answers[label] for m in out)))
        for name in ("networkx", "scipy", "naive"):
            for k, (h, answer) in enumerate(zip(trees, answers[name])):
                if not np.array_equal(as_matrix(answer, len(h)), ours_by_tree[k][: len(h), : len(h)].numpy()):
                    raise AssertionError(f"{name} disagrees with tree_distances on treebank sentence {k} ({label})")
    lengths = [len(h) for h in trees]
    depth = f"{np.mean([tree_depth(h) for h in trees]):.1f}"
    size = f"{min(lengths)}-{max(lengths)} (mean {np.mean(lengths):.1f})"
    padding = [partial(pad_batch, trees[start:start + batch]) for start in range(0, len(trees), batch)]
    padding_seconds, _ = side_by_side({"pad": padding}, {"pad": rounds})
    for label in orders:
        t = {"ours": seconds[label], **{name: seconds[name] for name in ("networkx", "scipy", "naive")}}
        print(tree_row(f"cs_pud treebank, {label}", size, depth, {k: v / len(trees) for k, v in t.items()}), flush=True)
    print(f"\n(Not included above: building the padded heads tensors from Python lists takes "
          f"{us(padding_seconds['pad'] / len(trees))} µs/sentence on the treebank.)")


TARGET_PER_SENTENCE, TARGET_BATCHED = 5.0, 15.0


def run_networkx_edges(n: int, edges: list[tuple[int, int]]) -> dict:
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges)
    return dict(nx.all_pairs_shortest_path_length(graph))


def provider_paths(batch: int, rounds: int, quick: bool = False) -> None:
    """``provider(s)`` + ``collate`` and ``provider.batch`` on the treebank against networkx, side by side."""
    from structattn.structures import collate, get_provider
    from structattn.structures.readers import load_bundled

    sentences = load_bundled(200 if quick else None)
    by_length = sorted(sentences, key=len)
    print("\n| provider path (cs_pud, %d sentences) | ours µs/sentence | networkx µs/sentence | vs networkx | target |"
          % len(sentences))
    print("|---|---|---|---|---|")
    for name in ("dependency", "semantic"):
        provider = get_provider(name)
        edges = [provider.graph_edges(s) for s in sentences]
        chunks_of = lambda xs: [xs[i:i + batch] for i in range(0, len(xs), batch)]  # noqa: E731
        methods = {
            "per-sentence provider(s) + collate": [partial(lambda b: collate([provider(s) for s in b]), c)
                                                   for c in chunks_of(sentences)],
            "batched provider.batch, file order": [partial(provider.batch, c) for c in chunks_of(sentences)],
            "batched provider.batch, length-sorted": [partial(provider.batch, c) for c in chunks_of(by_length)],
            "networkx": [partial(run_networkx_edges, len(s), e) for s, e in zip(sentences, edges)],
        }
        for items in methods.values():  # warm-up
            items[0]()
        seconds, answers = side_by_side(methods, {k: rounds for k in methods})
        expected = {id(s): as_matrix(a, len(s)) for s, a in zip(sentences, answers["networkx"])}
        for label, order in (("per-sentence provider(s) + collate", sentences),
                             ("batched provider.batch, file order", sentences),
                             ("batched provider.batch, length-sorted", by_length)):
            got = [d for out in answers[label] for d in out.distance]
            for s, d in zip(order, got):
                if not np.array_equal(d[: len(s), : len(s)].numpy(), expected[id(s)]):
                    raise AssertionError(f"{name}: {label} disagrees with networkx on sentence {s.id}")
        base = seconds["networkx"] / len(sentences)
        for label in methods:
            if label == "networkx":
                continue
            ours = seconds[label] / len(sentences)
            target = "" if name != "dependency" else (
                f">= {TARGET_PER_SENTENCE:.0f}x" if label.startswith("per-sentence") else f">= {TARGET_BATCHED:.0f}x")
            print(f"| {name}: {label} | {us(ours)} | {us(base)} | {base / ours:,.1f}x | {target} |", flush=True)


def graph_table(sizes: tuple[int, ...], batch: int, rounds: int, rng: np.random.Generator) -> None:
    print("\n| graphs (2n random edges) | n | ours µs/graph | networkx µs/graph | vs networkx |")
    print("|---|---|---|---|---|")
    for directed in (False, True):
        for n in [s for s in sizes if s <= 256]:
            t = compare_graphs(n, batch, directed, rounds, rng)
            kind = "directed" if directed else "undirected"
            print(f"| {kind} | {n} | {us(t['ours'])} | {us(t['networkx'])} | {t['networkx'] / t['ours']:,.1f}x |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
