"""Trees induced from attention weights, scored by UUAS against gold dependency trees.

Each head's word-level attention ``w`` (b, h, n, n) (row ``i`` = query ``i``) is decoded into a tree over the
scored tokens with one of three ``scoring`` rules:

* ``"symmetric"`` (default): the maximum spanning tree of ``w + w^T`` (Raganato & Tiedemann 2018, "An
  Analysis of Encoder Representations in Transformer-Based Machine Translation"); scipy's
  ``minimum_spanning_tree`` on negated, shifted weights.
* ``"marecek_rosa"``: the maximum spanning tree of the pair score ``s(i, j) = sum_r w[r, i] * w[r, j]``
  (two words score high when the same queries attend to both), the dependency extraction of
  Mareček & Rosa (2019, "From Balustrades to Pierre Vinken: Looking for Syntax in Transformer
  Self-Attentions"); ``r`` runs over the sentence's real tokens (punctuation included).
* ``"directed_gold_root"``: the maximum spanning arborescence (Edmonds' algorithm, networkx) of the
  directed graph whose edge head ``j`` -> dependent ``i`` weighs ``w[i, j]`` (the dependent attends to its
  head), rooted at the gold root, as in Limisiewicz, Rosa & Mareček (2020, "Universal Dependencies according
  to BERT: both more specific and more general"); scored by its undirected edges.

UUAS (unlabelled undirected attachment score) is the fraction of gold tree edges that the induced tree
contains, pooled over the corpus (``sum correct / sum gold``), the way Hewitt & Manning (2019) report it.
Punctuation (``upos == "PUNCT"``) is left out of decoding and scoring by default, as in the structural probes.

Baselines reported alongside: a uniformly random spanning tree per sentence (a seeded uniform Prüfer
sequence, which is uniform over the ``n^(n-2)`` labelled trees; expected UUAS ``2 / n`` per sentence),
averaged over ``num_random`` samples, and the right-branching chain ``i - (i+1)``.

Attention must already be word-level (subword attention pooled to words by the caller) and padded at the
end: token ``i`` of sentence ``k`` is word ``i``.

Glossary: b batch, h heads, n tokens (words), l layers.
"""

from __future__ import annotations

import random
from typing import Sequence

import networkx as nx
import numpy as np
import torch

from structattn.structures.sentence import Sentence
from structattn.structures.trees import Edge, punctuation_keep, spanning_tree, tree_edges, uuas



def random_tree(nodes: Sequence[int], rng: random.Random) -> set[Edge]:
    """A uniformly random spanning tree over ``nodes`` (uniform Prüfer sequence)."""
    m = len(nodes)
    if m < 2:
        return set()
    code = [rng.randrange(m) for _ in range(m - 2)]
    tree = nx.from_prufer_sequence(code) if m > 2 else nx.path_graph(2)
    return {(min(nodes[i], nodes[j]), max(nodes[i], nodes[j])) for i, j in tree.edges()}


def random_tree_uuas(
    sentences: Sequence[Sentence], num_samples: int = 10, seed: int = 0, exclude_punct: bool = False
) -> float:
    """Mean corpus UUAS of uniformly random spanning trees over each sentence's scored words."""
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    rng = random.Random(seed)
    keeps = [punctuation_keep(s, exclude_punct) for s in sentences]
    gold = [tree_edges(s.heads, keep) for s, keep in zip(sentences, keeps)]
    nodes = [[i for i, k in enumerate(keep) if k] for keep in keeps]
    scores = [uuas([random_tree(ns, rng) for ns in nodes], gold) for _ in range(num_samples)]
    return float(np.mean(scores))


def right_branching_uuas(sentences: Sequence[Sentence], exclude_punct: bool = False) -> float:
    """Corpus UUAS of the chain linking each scored word to the next scored word."""
    keeps = [punctuation_keep(s, exclude_punct) for s in sentences]
    gold = [tree_edges(s.heads, keep) for s, keep in zip(sentences, keeps)]
    chains = []
    for keep in keeps:
        ns = [i for i, k in enumerate(keep) if k]
        chains.append(set(zip(ns[:-1], ns[1:])))
    return uuas(chains, gold)


SCORINGS = ("symmetric", "marecek_rosa", "directed_gold_root")


def induce_trees(
    weights: torch.Tensor | Sequence[torch.Tensor],
    token_mask: torch.Tensor,
    scoring: str = "symmetric",
    roots: Sequence[int] | None = None,
    query_mask: torch.Tensor | None = None,
) -> list[list[set[Edge]]] | list[list[list[set[Edge]]]]:
    """Trees induced from attention, per sentence and head (and layer); see the module docstring.

    Args:
        weights: attention probabilities (b, h, n, n), or a sequence of them (one per layer).
        token_mask: (b, n) bool, ``True`` on the tokens the tree spans; the rest (padding, or tokens left
            out on purpose, such as punctuation) are ignored whatever their weights.
        scoring: ``"symmetric"``, ``"marecek_rosa"`` or ``"directed_gold_root"``.
        roots: per sentence, the token position of the gold root (``"directed_gold_root"`` only). A root
            outside ``token_mask`` leaves the arborescence's root free.
        query_mask: (b, n) bool, the queries ``r`` summed over by ``"marecek_rosa"`` (default ``token_mask``).

    Returns:
        ``trees[k][head]`` (or ``trees[layer][k][head]``): edges ``(i, j)``, ``i < j``, in token positions.

    Raises:
        ValueError: for shapes that do not fit together, an unknown scoring, or missing roots.
    """
    if not isinstance(weights, torch.Tensor):
        return [induce_trees(w, token_mask, scoring, roots, query_mask) for w in weights]  # type: ignore[misc]
    if scoring not in SCORINGS:
        raise ValueError(f"induce_trees: unknown scoring {scoring!r}; known: {', '.join(SCORINGS)}")
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"induce_trees: attention must be (b, h, n, n), got shape {tuple(weights.shape)}")
    b, _, n, _ = weights.shape
    for label, m in (("token_mask", token_mask), ("query_mask", query_mask)):
        if m is not None and tuple(m.shape) != (b, n):
            raise ValueError(f"induce_trees: {label} has shape {tuple(m.shape)}, attention needs ({b}, {n})")
    if scoring == "directed_gold_root" and (roots is None or len(roots) != b):
        raise ValueError(f"induce_trees: scoring 'directed_gold_root' needs one root per sentence ({b}), got {roots!r}")
    w = weights.detach().to(torch.float64).cpu().numpy()  # (b, h, n, n)
    mask = token_mask.bool().cpu().numpy()
    queries = mask if query_mask is None else query_mask.bool().cpu().numpy()
    out = []
    for k in range(b):
        positions = np.flatnonzero(mask[k])
        root = None if roots is None else int(roots[k])
        per_head = []
        for head_weights in w[k]:
            local = _decode(head_weights, positions, np.flatnonzero(queries[k]), scoring, root)
            per_head.append({(int(positions[i]), int(positions[j])) for i, j in local})
        out.append(per_head)
    return out


def _decode(w: np.ndarray, positions: np.ndarray, queries: np.ndarray, scoring: str, root: int | None) -> set[Edge]:
    """Edges (local indices into ``positions``) of one head's tree. Shapes: w (n, n)."""
    sub = w[np.ix_(positions, positions)]  # (m, m)
    if scoring == "symmetric":
        return spanning_tree(sub + sub.T, maximum=True)
    if scoring == "marecek_rosa":
        rows = w[np.ix_(queries, positions)]  # (r, m)
        return spanning_tree(rows.T @ rows, maximum=True)
    local_root = None if root is None or root not in positions else int(np.flatnonzero(positions == root)[0])
    return directed_tree(sub, local_root)


def directed_tree(w: np.ndarray, root: int | None) -> set[Edge]:
    """Undirected edges of the maximum spanning arborescence whose edge ``j -> i`` weighs ``w[i, j]``,
    rooted at ``root`` (no edge enters it) or at whichever node is best when ``root`` is None (networkx's
    Edmonds). Shapes: w (m, m)."""
    m = w.shape[0]
    if m < 2:
        return set()
    graph = nx.DiGraph()
    graph.add_nodes_from(range(m))
    graph.add_weighted_edges_from((j, i, float(w[i, j])) for i in range(m) for j in range(m) if i != j and i != root)
    tree = nx.maximum_spanning_arborescence(graph, preserve_attrs=False)
    return {(min(i, j), max(i, j)) for i, j in tree.edges()}


def tree_induction_uuas(
    weights_per_layer: torch.Tensor | Sequence[torch.Tensor],
    sentences: Sequence[Sentence],
    token_mask: torch.Tensor | None = None,
    exclude_punct: bool = True,
    num_random: int = 10,
    seed: int = 0,
    scoring: str = "symmetric",
) -> list[dict[str, float]]:
    """UUAS of the tree induced from every layer and head, with the two baselines alongside.

    Args:
        weights_per_layer: per layer, word-level attention (b, h, n, n) (a single tensor = one layer).
        sentences: the b gold sentences (with ``heads``; with ``upos`` unless ``exclude_punct=False``).
        token_mask: (b, n) bool; by default built from the sentence lengths. Must be ``True`` exactly on
            the first ``len(sentence)`` tokens.
        exclude_punct: decode and score over non-punctuation words only (``upos == "PUNCT"`` removed; the
            default, as in Hewitt & Manning 2019); the baselines likewise.
        num_random: random trees per sentence for the random baseline; ``seed`` seeds them.
        scoring: how a head's attention becomes a tree (see the module docstring).

    Returns:
        rows ``{"layer", "head", "uuas", "random_baseline", "right_branching_baseline"}``, layer-major.
    """
    layers = [weights_per_layer] if isinstance(weights_per_layer, torch.Tensor) else list(weights_per_layer)
    if not layers:
        raise ValueError("tree_induction_uuas: no layers given")
    if layers[0].dim() != 4 or layers[0].shape[0] != len(sentences):
        raise ValueError(
            f"tree_induction_uuas: attention of shape {tuple(layers[0].shape)} for {len(sentences)} sentences; "
            "expected (b, h, n, n) with b = number of sentences"
        )
    token_mask = _sentence_mask(sentences, layers[0].shape[-1], token_mask)
    keeps = [punctuation_keep(s, exclude_punct) for s in sentences]
    gold = [tree_edges(s.heads, keep) for s, keep in zip(sentences, keeps)]
    scored = token_mask.clone()
    for k, keep in enumerate(keeps):
        scored[k, : len(keep)] &= torch.tensor(keep)
    roots = [s.heads.index(-1) for s in sentences]
    trees_per_layer = induce_trees(layers, scored, scoring, roots, query_mask=token_mask)
    random_base = random_tree_uuas(sentences, num_random, seed, exclude_punct)
    chain_base = right_branching_uuas(sentences, exclude_punct)
    rows = []
    for layer, trees in enumerate(trees_per_layer):
        for head in range(len(trees[0])):
            rows.append({
                "layer": layer,
                "head": head,
                "uuas": uuas([per_head[head] for per_head in trees], gold),
                "random_baseline": random_base,
                "right_branching_baseline": chain_base,
            })
    return rows


def _sentence_mask(sentences: Sequence[Sentence], n: int, token_mask: torch.Tensor | None) -> torch.Tensor:
    """The end-padded token mask of ``sentences`` (built, or checked when given)."""
    lengths = torch.tensor([len(s) for s in sentences])
    for s in sentences:
        if s.heads is None:
            raise ValueError(f"sentence {s.id!r} has no heads (a gold tree is needed)")
        if len(s) > n:
            raise ValueError(f"sentence {s.id!r} has {len(s)} words, but the attention covers only {n} tokens")
    expected = torch.arange(n)[None, :] < lengths[:, None]
    if token_mask is None:
        return expected
    if tuple(token_mask.shape) != tuple(expected.shape):
        raise ValueError(f"token_mask has shape {tuple(token_mask.shape)}, expected {tuple(expected.shape)}")
    for k, s in enumerate(sentences):
        if not torch.equal(token_mask[k].bool().cpu(), expected[k]):
            raise ValueError(
                f"sentence {s.id!r}: token_mask marks {int(token_mask[k].sum())} tokens; it must mark exactly "
                f"its first {len(s)} tokens (word-level attention, padded at the end)"
            )
    return expected
