"""Batched hop distances: trees by ancestor bitsets or Euler-tour range minima, graphs by batched BFS.

Glossary: b batch, n tokens; u, v are token positions, i, j positions in preorder (DFS order).

Trees (:func:`tree_distances`), vectorised over the whole padded batch, no per-pair or per-node loop.
Roots and padding hang under one virtual root per row, so a forest is one tree whose top level is cut.

* Up to 64 tokens, ancestor bitsets. Bit v of ``anc[u]`` is set when v is u or an ancestor of u; the
  sets come from pointer doubling (``anc[u] |= anc[jump[u]]; jump[u] = jump[jump[u]]``, ``ceil(log2 n)``
  steps). The path between u and v uses exactly the edges above the nodes of one root path but not the
  other, so ``dist(u, v) = popcount(anc[u] XOR anc[v])``: one XOR and one popcount per entry.
* Beyond 64 tokens, ``dist(u, v) = depth(u) + depth(v) - 2 depth(lca(u, v))`` with the Euler-tour LCA
  (Bender & Farach-Colton): in preorder, for positions ``i < j`` the walk ``i+1 .. j`` stays inside the
  LCA's subtree and passes the LCA's child, so ``depth(lca) = min(depth[i+1 .. j]) - 1`` and

      dist(i, j) = depth[i] + depth[j] + 2 - 2 min(depth[i+1 .. j]).

  (1) Preorder positions and depths come from list ranking of the Euler tour (``ceil(log2 2n)``
  pointer-jumping steps). (2) The range minima are running minima along the rows: one vectorised step per
  preorder row of all ``b`` matrices extends the previous row (a forward pass fills ``i < j``, a backward
  pass ``i > j``; one write per entry, no ``n^3`` work). (3) One row gather and one column gather return to
  token order; padding reads a row / column of ``-1``; in a forest a range that meets a root (depth 0)
  crosses trees and gives ``-1``.

The tree steps run in numpy: a small vectorised call costs ~1-2 us there against ~5 us in torch, and the
scan makes ``2n`` of them (torch does the broadcasting adds and gathers, where it is faster). The ``n x n``
temporaries live in a per-thread workspace that only grows, so repeated calls do not hand memory back to the
system and fault it in again (which made an earlier batched version slower than a per-sentence loop).

General graphs (:func:`graph_distances`): breadth-first search from every token of every sentence at once;
each BFS level moves the whole frontier ``(b*n, n)`` along the edges with one sparse (block-diagonal CSR)
matrix product.
"""

from __future__ import annotations

import math
import threading
import warnings

import numpy as np
import torch

from structattn.structures._util import distance_dtype

#: Up to this many tokens trees use ancestor bitsets (one 64-bit word per token; needs numpy >= 2.0 for
#: ``np.bitwise_count``), beyond it the Euler-tour scan.
BITSET_MAX_TOKENS = 64 if hasattr(np, "bitwise_count") else 0

#: Entries of the scan's ``n x n`` post-processing done together (a chunk of sentences stays in cache).
CHUNK_ENTRIES = 2**19

#: Workspaces above this many bytes are freed after the call instead of kept for the next one.
KEEP_WORKSPACE_BYTES = 128 * 2**20

_local = threading.local()


def tree_distances(heads: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Hops between tokens in the undirected forest given by ``heads``, for a whole padded batch.

    Args:
        heads: 0-based head of each token, ``-1`` for a root (several roots in a row = a forest).
            Values on padding positions are ignored.
        token_mask: ``True`` on real tokens.

    Returns:
        ``distance[b, u, v]`` = number of edges on the path between tokens ``u`` and ``v``; ``0`` on the
        diagonal of real tokens; ``-1`` between different trees and on padding rows / columns.

    Shapes:
        heads: (b, n) integer; token_mask: (b, n) bool; returns (b, n, n) of ``distance_dtype(n)``
        (int16 up to 32767 tokens) on the device of ``heads``.

    Raises:
        ValueError: for mismatched shapes, or (naming the batch row and token) a real token whose head is
            out of range or a padding position, or heads that contain a cycle (found after a bounded number
            of pointer-jumping steps, never by walking).
    """
    b, n = _check_mask(token_mask, "tree_distances")
    if heads.shape != token_mask.shape or heads.is_floating_point():
        raise ValueError(f"tree_distances: heads must be an integer tensor shaped like token_mask "
                         f"{tuple(token_mask.shape)}, got {heads.dtype} {tuple(heads.shape)}")
    if b == 0 or n == 0:
        return torch.full((b, n, n), -1, dtype=distance_dtype(n), device=heads.device)
    real = token_mask.detach().cpu().numpy()
    parent, forest = _parents(np.ascontiguousarray(heads.detach().cpu().numpy(), dtype=np.int64), real)
    if n <= BITSET_MAX_TOKENS:
        out = _distances_from_bitsets(_ancestor_bitsets(parent, real), parent, real, forest)
    else:
        pre, depth = _preorder_and_depth(parent, real)
        out = _distances_from_preorder(pre, depth, real, forest)
    return out.to(device=heads.device, dtype=distance_dtype(n))


def _check_mask(token_mask: torch.Tensor, who: str) -> tuple[int, int]:
    if token_mask.dim() != 2 or token_mask.dtype != torch.bool:
        raise ValueError(f"{who}: token_mask must be a (b, n) bool tensor, got {token_mask.dtype} {tuple(token_mask.shape)}")
    return token_mask.shape[0], token_mask.shape[1]


def _parents(heads: np.ndarray, real: np.ndarray) -> tuple[np.ndarray, bool]:
    """Validated parents, roots and padding hung under a virtual root ``n``; and whether a row is a forest.

    Shapes:
        heads (int64), real: (b, n) -> parents (b, n) int64.
    """
    b, n = heads.shape
    head_ok = heads.view(np.uint64) < n  # 0 <= head < n (negative heads wrap to huge)
    if not real.all():  # a head may point at padding
        head_ok &= real.ravel()[np.where(head_ok, heads, 0) + (np.arange(b) * n)[:, None]]
    is_root = heads == -1
    bad = real & ~(head_ok | is_root)
    if bad.any():
        row, tok = (int(x) for x in np.argwhere(bad)[0])
        head = int(heads[row, tok])
        why = f"outside -1..{n - 1}" if not -1 <= head < n else "a padding position"
        raise ValueError(f"tree_distances: batch row {row}: token {tok} has head {head}, which is {why} "
                         f"(the row has {int(real[row].sum())} real tokens)")
    forest = bool((np.count_nonzero(is_root & real, axis=1) > 1).any())
    return np.where(head_ok & real, heads, n), forest


def _raise_if_cycle(stuck: np.ndarray) -> None:
    """``stuck`` (b, n): real tokens still below a non-root after enough jumps to climb any tree."""
    if stuck.any():
        row, tok = (int(x) for x in np.argwhere(stuck)[0])
        raise ValueError(f"tree_distances: batch row {row}: the heads contain a cycle (token {tok} does not "
                         "reach a root)")


# ---------------------------------------------------------------- up to 64 tokens: ancestor bitsets


def _ancestor_bitsets(parent: np.ndarray, real: np.ndarray) -> np.ndarray:
    """Bit ``v`` of ``anc[b, u]`` is set iff token ``v`` is ``u`` or an ancestor of ``u`` (padding: 0).

    Shapes:
        parent: (b, n) with ``n`` for the virtual root, n <= 64; returns (b, n) uint64.
    """
    b, n = parent.shape
    k = n + 1
    top = (np.arange(b) * k)[:, None] + n  # the virtual root of each row, in flat indexing
    jump = np.empty((b, k), dtype=np.int64)
    jump[:, :n] = parent + (top - n)
    jump[:, n:] = top
    anc = np.zeros((b, k), dtype=np.uint64)
    anc[:, :n] = np.where(real, np.left_shift(np.uint64(1), np.arange(n, dtype=np.uint64)), np.uint64(0))
    jump, anc = jump.ravel(), anc.ravel()
    for _ in range(math.ceil(math.log2(n))):  # after s steps: ancestors up to 2^s - 1 levels up
        anc |= anc[jump]
        jump = jump[jump]
    _raise_if_cycle((jump.reshape(b, k)[:, :n] != top) & real)
    return anc.reshape(b, k)[:, :n]


#: Cost model of :func:`_distances_from_bitsets` (ns): a vectorised pass per padded entry, and per sentence
#: the fixed cost of its own numpy calls; rows are looped over when padding would cost more than the calls.
_NS_PER_PADDED_ENTRY, _NS_PER_ROW, _NS_PER_REAL_ENTRY = 4, 3000, 2


def _distances_from_bitsets(anc: np.ndarray, parent: np.ndarray, real: np.ndarray, forest: bool) -> torch.Tensor:
    """``popcount(anc[u] ^ anc[v])``, ``-1`` across trees and on padding. Shapes: (b, n) -> (b, n, n) int16.

    Padded batches of mixed lengths (a treebank in file order: mean 17 tokens, longest 60) would spend most
    of the vectorised passes on padding; then each row computes only its ``n_k x n_k`` block into a buffer
    of ``-1`` (a loop over sentences, never over pairs), chosen by the cost model above."""
    b, n = anc.shape
    lengths = real.sum(1)
    if _NS_PER_PADDED_ENTRY * b * n * n > _NS_PER_ROW * b + _NS_PER_REAL_ENTRY * int((lengths * lengths).sum()) \
            and bool((real == (np.arange(n) < lengths[:, None])).all()):  # rows must be left-aligned
        return _distances_by_row(anc, parent, lengths, forest)
    words = torch.from_numpy(anc.view(np.int64))
    out = torch.empty((b, n, n), dtype=torch.int16)
    np.bitwise_count((words[:, :, None] ^ words[:, None, :]).numpy().view(np.uint64), out=out.numpy())
    if forest:
        root_bits = np.bitwise_or.reduce(np.where((parent == n) & real, anc, np.uint64(0)), axis=1)
        tree = torch.from_numpy((anc & root_bits[:, None]).view(np.int64))  # the bit of each token's root
        out.masked_fill_(tree[:, :, None] != tree[:, None, :], -1)
    if not real.all():
        padding = torch.from_numpy(~real)
        out.masked_fill_(padding[:, :, None] | padding[:, None, :], -1)
    return out


def _distances_by_row(anc: np.ndarray, parent: np.ndarray, lengths: np.ndarray, forest: bool) -> torch.Tensor:
    """:func:`_distances_from_bitsets` one row at a time on the real block of left-aligned rows."""
    b, n = anc.shape
    out = np.full((b, n, n), -1, dtype=np.int16)
    for k, m in enumerate(lengths.tolist()):
        words = anc[k, :m]
        block = out[k, :m, :m]
        np.bitwise_count(words[:, None] ^ words[None, :], out=block)
        if forest:
            roots = parent[k, :m] == n
            if np.count_nonzero(roots) > 1:
                tree = words & np.bitwise_or.reduce(words[roots])  # the bit of each token's root
                block[tree[:, None] != tree[None, :]] = -1
    return torch.from_numpy(out)


# ---------------------------------------------------------------- beyond: Euler tour and running minima


def _preorder_and_depth(parent: np.ndarray, real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Preorder position and depth (roots 0) of every token, by list ranking of the Euler tour.

    Each arc's rank packs (tokens entered from it to the end of the tour) * w + (arcs from it to the end),
    ``w = 2n + 1``; ``ceil(log2(2n))`` pointer-jumping steps sum them over the tour, all rows at once.

    Shapes:
        parent: (b, n) with ``n`` for the virtual root; returns two (b, n) int64 arrays.
    """
    b, n = parent.shape
    up, k, weight = n + 1, 2 * (n + 1), 2 * n + 1
    nxt = _tour_successors(parent)
    rank = np.zeros((b, k), dtype=np.int64)
    rank[:, :n] = 1 + weight  # entering a token
    rank[:, up:up + n] = 1  # leaving a token
    rank, step, jumped = rank.ravel(), np.empty(b * k, dtype=np.int64), np.empty(b * k, dtype=np.int64)
    for _ in range(math.ceil(math.log2(2 * n))):
        rank += np.take(rank, nxt, out=step, mode="wrap")  # mode other than "raise": no hidden copy
        nxt, jumped = np.take(nxt, nxt, out=jumped, mode="wrap"), nxt
    _raise_if_cycle((nxt.reshape(b, k)[:, :n] != (np.arange(b) * k + k - 1)[:, None]) & real)
    entered, arcs = np.divmod(rank.reshape(b, k)[:, :n], weight)
    pre = n - entered
    return pre, 2 * pre - (2 * n - arcs)


def _tour_successors(parent: np.ndarray) -> np.ndarray:
    """Successor of every arc of the Euler tour, children visited in token order.

    Row ``r`` owns arcs ``r*k .. r*k + k - 1`` with ``k = 2(n + 1)``: arc ``v`` enters node ``v`` from its
    parent and arc ``n + 1 + v`` leaves it upwards, for the tokens ``v < n`` and the virtual root ``v = n``
    (its entering arc is unused, its leaving arc ends the tour and loops on itself).

    Shapes:
        parent: (b, n) with ``n`` for the virtual root; returns (b * k,) int64 global arc ids.
    """
    b, n = parent.shape
    up, k = n + 1, 2 * (n + 1)
    base = (np.arange(b) * k)[:, None]
    enter_child = np.argsort(parent, axis=1, kind="stable") + base  # grouped by parent, siblings in order
    enter_parent = np.sort(parent, axis=1) + base
    first = np.empty((b, n), dtype=bool)  # first child of its parent
    first[:, 0] = True
    np.not_equal(enter_parent[:, 1:], enter_parent[:, :-1], out=first[:, 1:])
    leave_to = enter_parent + up  # after the last child, leave the parent (the virtual root: end)
    np.copyto(leave_to[:, :-1], enter_child[:, 1:], where=~first[:, 1:])  # else enter the next sibling
    succ = np.empty((b, k), dtype=np.int64)
    succ[:, :up] = base + np.arange(up, k)  # a leaf is left right after it is entered
    succ[:, up:] = base + (k - 1)  # end of the tour
    succ = succ.ravel()
    succ[(enter_child + up).ravel()] = leave_to.ravel()
    succ[enter_parent[first]] = enter_child[first]
    return succ


def _distances_from_preorder(pre: np.ndarray, depth: np.ndarray, real: np.ndarray, forest: bool) -> torch.Tensor:
    """Distance matrices from preorder positions and depths (module docstring, steps 2-3).

    Shapes:
        pre, depth, real: (b, n). Returns (b, n, n) int16 (int32 beyond 16382 tokens).
    """
    b, n = pre.shape
    work = np.int16 if 2 * n + 2 <= np.iinfo(np.int16).max else np.int32
    padded = not real.all()
    row_index = pre + (np.arange(b) * n)[:, None]  # row of each token in the flat (b*n, n) preorder matrices
    depth_pre = np.empty(b * n, dtype=work)
    depth_pre[row_index.ravel()] = depth.ravel()
    depth_pre = depth_pre.reshape(b, n)
    scan_np, gathered_np = _workspace(b, n, work)  # scan: (b*n + 1, n + 1), last row and column are -1
    _running_maxima(scan_np[: b * n].reshape(b, n, n + 1)[:, :, :n], -2 * depth_pre)  # = -2 min(depth[..])
    scan, gathered = torch.from_numpy(scan_np), torch.from_numpy(gathered_np)
    square = scan[: b * n].view(b, n, n + 1)[:, :, :n]  # (b, i, j) in preorder
    depth_t = torch.from_numpy(depth_pre)
    row_index = torch.from_numpy(np.where(real, row_index, b * n) if padded else row_index)  # padding: row of -1
    column_index = torch.from_numpy(np.where(real, pre, n) if padded else pre)[:, None, :]  # padding: column of -1
    out = torch.empty((b, n, n), dtype=depth_t.dtype)
    per = max(1, CHUNK_ENTRIES // (n * n))  # sentences per chunk: finish each chunk while it is in cache
    for s in range(0, b, per):
        e = min(b, s + per)
        chunk = square[s:e]
        cross = (chunk == 0) if forest else None  # the range passes a root: another tree
        chunk.add_((depth_t[s:e] + 2)[:, :, None]).add_(depth_t[s:e, None, :])
        chunk.diagonal(dim1=1, dim2=2).fill_(0)
        if cross is not None:
            chunk.masked_fill_(cross, -1)
        torch.index_select(scan, 0, row_index[s:e].ravel(), out=gathered[s * n:e * n])
        torch.gather(gathered[s * n:e * n].view(e - s, n, n + 1), 2, column_index[s:e].expand(e - s, n, n),
                     out=out[s:e])
    _release_if_large()
    return out


def _running_maxima(square: np.ndarray, values: np.ndarray) -> None:
    """``square[:, i, j] = max(values[:, min(i,j)+1 .. max(i,j)])`` off the diagonal, in place; the diagonal
    gets the dtype's minimum. Shapes: square (b, n, n), values (b, n)."""
    n = square.shape[1]
    diagonal = np.arange(n)
    square[:, diagonal, diagonal] = np.iinfo(square.dtype).min
    # One vectorised step per row over the whole batch: row j extends row j - 1 (columns < j) and
    # row j + 1 (columns > j); the minimum on the diagonal starts each range afresh.
    for j in range(1, n):
        np.maximum(square[:, j - 1, :j], values[:, j:j + 1], out=square[:, j, :j])
    for j in range(n - 2, -1, -1):
        np.maximum(square[:, j + 1, j + 1:], values[:, j + 1:j + 2], out=square[:, j, j + 1:])


def _workspace(b: int, n: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Two reusable buffers, (b*n + 1, n + 1) with -1 in the last row and column, and (b*n, n + 1)."""
    need = (2 * b * n + 1) * (n + 1)
    buffers = _local.__dict__.setdefault("buffers", {})
    flat = buffers.get(dtype)
    if flat is None or flat.size < need:
        flat = buffers[dtype] = np.empty(need, dtype=dtype)
    scan = flat[: (b * n + 1) * (n + 1)].reshape(b * n + 1, n + 1)
    scan[b * n] = -1
    scan[:, n] = -1
    gathered = flat[(b * n + 1) * (n + 1): need].reshape(b * n, n + 1)
    return scan, gathered


def _release_if_large() -> None:
    buffers = _local.__dict__.get("buffers", {})
    for dtype in [d for d, flat in buffers.items() if flat.nbytes > KEEP_WORKSPACE_BYTES]:
        del buffers[dtype]


def release_workspace() -> None:
    """Free this thread's cached distance workspace (it is rebuilt on the next call)."""
    _local.__dict__.pop("buffers", None)


# ---------------------------------------------------------------- general graphs


def graph_distances(edge_index: torch.Tensor, token_mask: torch.Tensor, directed: bool = False) -> torch.Tensor:
    """Shortest-path hops by breadth-first search from every token of every sentence at once.

    Args:
        edge_index: rows (batch, source, target); an edge ``source -> target`` of sentence ``batch``.
        token_mask: ``True`` on real tokens.
        directed: follow edges only from source to target (else both ways).

    Returns:
        ``distance[b, s, t]`` = fewest edges from ``s`` to ``t``; ``0`` on the diagonal of real tokens;
        ``-1`` where ``t`` is unreachable from ``s`` and on padding rows / columns.

    Shapes:
        edge_index: (3, E) long; token_mask: (b, n) bool; returns (b, n, n) of ``distance_dtype(n)``.

    Raises:
        ValueError: naming the edge and batch row, for an edge outside the batch, the tokens, or onto padding.
    """
    b, n = _check_mask(token_mask, "graph_distances")
    real = token_mask.detach().cpu()
    batch, source, target = _check_edges(edge_index.detach().cpu(), real)
    if not directed:
        batch, source, target = torch.cat([batch, batch]), torch.cat([source, target]), torch.cat([target, source])
    spread = _sparse_ones(batch * n + target, batch * n + source, b * n)  # (spread @ x)[t] = sum of x[s], s -> t
    dist = torch.full((b * n, n), -1, dtype=distance_dtype(n))  # dist[b*n + t, s]: hops s -> t
    frontier = (torch.eye(n, dtype=torch.bool).expand(b, n, n) & real[:, :, None]).reshape(b * n, n)
    reached = frontier.clone()
    dist.masked_fill_(frontier, 0)
    for hop in range(1, n):
        frontier = (torch.sparse.mm(spread, frontier.float()) > 0) & ~reached  # (b*n, n)
        if not frontier.any():
            break
        dist.masked_fill_(frontier, hop)
        reached |= frontier
    dist = dist.view(b, n, n)  # (b, t, s); symmetric when undirected
    if directed:
        dist = dist.transpose(1, 2).contiguous()
    return dist.to(token_mask.device)


def _sparse_ones(rows: torch.Tensor, columns: torch.Tensor, size: int) -> torch.Tensor:
    """A (size, size) CSR matrix with a 1 at each (row, column) (duplicates add up)."""
    values = torch.ones(rows.numel())
    coo = torch.sparse_coo_tensor(torch.stack([rows, columns]), values, (size, size), check_invariants=False)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the product used here is stable
        warnings.simplefilter("ignore", UserWarning)
        return coo.coalesce().to_sparse_csr()


def _check_edges(edge_index: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validated (batch, source, target) rows. Shapes: (3, E), (b, n) -> three (E,) long tensors."""
    b, n = real.shape
    if edge_index.dim() != 2 or edge_index.shape[0] != 3 or edge_index.is_floating_point():
        raise ValueError(f"graph_distances: edge_index must be a (3, E) integer tensor of (batch, source, target), "
                         f"got {edge_index.dtype} {tuple(edge_index.shape)}")
    batch, source, target = edge_index.long()
    inside = (batch >= 0) & (batch < b) & (source >= 0) & (source < n) & (target >= 0) & (target < n)
    ok = inside.clone()
    ok[inside] = real[batch[inside], source[inside]] & real[batch[inside], target[inside]]
    if not bool(ok.all()):
        e = int((~ok).nonzero()[0])
        row, s, t = (int(x) for x in edge_index[:, e])
        why = "outside the batch or the tokens" if not inside[e] else "onto a padding position"
        raise ValueError(f"graph_distances: edge {e} (batch row {row}: {s} -> {t}) is {why} "
                         f"(batch of {b} rows, {n} positions)")
    return batch, source, target
