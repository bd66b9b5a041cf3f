"""``soft_bias``: a learnable score bias per distance bucket."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from itertools import pairwise

import torch
from torch import nn

from structattn.attention import bucket_bias as bb
from structattn.attention.base import key_padding, register_attention
from structattn.attention.biased import BACKENDS, BiasedAttention
from structattn.attention.learned import LearnedQuantity
from structattn.structures.structure import Structure

__all__ = ["BACKENDS", "SoftBiasAttention", "bucket_edges", "distance_buckets"]


def bucket_edges(
    max_distance: int, log_buckets_from: int | None = None, num_log_buckets: int | None = None
) -> list[int]:
    """Lower edges of the distance buckets (the last bucket is open-ended: ``>= max_distance``).

    Linear: ``[0, 1, ..., max_distance]``. Log: exact buckets ``0 .. T - 1`` (``T = log_buckets_from``), then
    ``num_log_buckets`` buckets starting at ``round(T * (max_distance / T) ** (m / num_log_buckets))``, then
    ``>= max_distance``.
    """
    if max_distance < 1:
        raise ValueError(f"soft_bias: max_distance must be >= 1, got {max_distance}")
    if log_buckets_from is None and num_log_buckets is None:
        return list(range(max_distance + 1))
    if log_buckets_from is None or num_log_buckets is None:
        raise ValueError(
            f"soft_bias: give both log_buckets_from and num_log_buckets, got {log_buckets_from} and {num_log_buckets}"
        )
    if not 1 <= log_buckets_from < max_distance or num_log_buckets < 1:
        raise ValueError(
            f"soft_bias: need 1 <= log_buckets_from < max_distance and num_log_buckets >= 1, got "
            f"log_buckets_from={log_buckets_from}, max_distance={max_distance}, num_log_buckets={num_log_buckets}"
        )
    ratio = max_distance / log_buckets_from
    starts = [round(log_buckets_from * ratio ** (m / num_log_buckets)) for m in range(num_log_buckets)]
    edges = list(range(log_buckets_from)) + starts + [max_distance]
    if any(a >= b for a, b in pairwise(edges)):
        raise ValueError(
            f"soft_bias: log_buckets_from={log_buckets_from}, num_log_buckets={num_log_buckets}, "
            f"max_distance={max_distance} give empty buckets (edges {edges}); use fewer log buckets"
        )
    return edges


def distance_buckets(
    structure: Structure, batch_size: int, device: torch.device, lower_edges: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bucket codes of the structure's distances (:func:`structattn.attention.bucket_bias.bucket_index`) and
    the key padding mask. Shared with ``fixed_decay``, which uses the same buckets.

    Shapes:
        returns index ``(b, n, n)`` and token_mask ``(b, n)``.
    """
    key = (id(structure), tuple(lower_edges), batch_size, str(device))
    with _LOCK:
        hit = _BUCKETS.get(key)
        if hit is not None and _still_valid(hit[0], structure):
            _BUCKETS.move_to_end(key)
            return hit[1], hit[2]
    distance = structure.dense_distance().to(device)
    token_mask = key_padding(structure, batch_size, distance.shape[-1], device)
    distance = distance.expand(batch_size, *distance.shape[-2:])
    index = bb.bucket_index(distance, token_mask, lower_edges)
    if structure.distance is not None:  # a window form builds its distance anew each call: not cached
        with _LOCK:
            _BUCKETS[key] = (_stamp(structure, key), index, token_mask)
            while len(_BUCKETS) > BUCKET_CACHE_SIZE:
                _BUCKETS.popitem(last=False)
    return index, token_mask


#: Bucket codes of the last few structures: the layers of one forward pass (each with its own ``soft_bias`` or
#: ``fixed_decay``) read the same structure and would each rebuild the same ``(b, n, n)`` codes (1 ms per layer
#: at b = 2, n = 512). An entry is used only while its structure is alive and holds the same distance and
#: token-mask tensors, unmodified since (version counters), and is dropped when its structure is freed (so no
#: codes outlive their batch); ``clear_bucket_cache()`` empties it.
BUCKET_CACHE_SIZE = 4
_BUCKETS: OrderedDict[tuple, tuple] = OrderedDict()
_LOCK = threading.RLock()  # re-entrant: a freed structure's callback may run inside a locked block (garbage collection)


def _forget(key: tuple) -> None:
    with _LOCK:
        _BUCKETS.pop(key, None)


def _stamp(structure: Structure, key: tuple) -> tuple:
    """Weak references to the structure (its entry under ``key`` is dropped when it is freed), its distance and
    its token mask, and the two tensors' versions: nothing is kept alive."""
    tensors = (structure.distance, structure.token_mask)
    refs = (weakref.ref(structure, lambda _: _forget(key)), *(None if t is None else weakref.ref(t) for t in tensors))
    return refs, tuple(None if t is None else t._version for t in tensors)


def _still_valid(stamp: tuple, structure: Structure) -> bool:
    """Whether ``structure`` still holds the very tensors of ``stamp``, unmodified since."""
    refs, versions = stamp
    now = (structure, structure.distance, structure.token_mask)
    return (all(obj is None if ref is None else ref() is obj for ref, obj in zip(refs, now))
            and versions == tuple(None if t is None else t._version for t in now[1:]))


def clear_bucket_cache() -> None:
    """Forget every cached bucket index."""
    with _LOCK:
        _BUCKETS.clear()


@register_attention("soft_bias")
class SoftBiasAttention(BiasedAttention):
    """Scores plus a learned bias per distance bucket (structural / syntax-guided bias):
    ``score_ij = q_i . k_j / sqrt(d) + scale * table[bucket(dist_ij)]``, softmax over real keys.

    Buckets: see :func:`bucket_edges`; one more bucket (the last) for unreachable real pairs (distance -1),
    distinct from padding. Padded keys get no bias and stay masked; padded query rows output zeros. The table
    starts at zero, so an untrained module equals ``full``. A :class:`~structattn.attention.biased.BiasedAttention`:
    its :meth:`bucket_bias` routes the fast paths through the bucket-table kernels. Reports its effective table
    (``scale * table``) with the bucket labels (:meth:`learned_quantities`).

    Args:
        num_heads: h.
        head_dim: d.
        max_distance: distances ``>= max_distance`` share the last distance bucket.
        log_buckets_from: when set, distances from here to ``max_distance`` get log-spaced buckets.
        num_log_buckets: how many log-spaced buckets.
        per_head: one table row per head (``table`` of shape ``(h, K)``) instead of one shared ``(K)``.
        learnable_scale: a learnable global multiplier ``scale`` (init 1) on the bias.
        backend: ``"sdpa"`` (fused; exact custom backward for the table on CPU), ``"flex"`` (FlexAttention:
            CUDA training, CPU inference) or ``"naive"`` (eager).

    Shapes:
        q, k, v ``(b, h, n, d)`` -> out ``(b, h, n, d)``, weights ``(b, h, n, n)``; structure.distance
        ``(b, n, n)``.
    """

    requires = frozenset({"distance"})

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        max_distance: int = 10,
        log_buckets_from: int | None = None,
        num_log_buckets: int | None = None,
        per_head: bool = False,
        learnable_scale: bool = False,
        backend: str = "sdpa",
    ) -> None:
        super().__init__(num_heads, head_dim)
        self.backend = self.check_backend(backend)
        self.lower_edges = bucket_edges(max_distance, log_buckets_from, num_log_buckets)
        self.max_distance, self.per_head = max_distance, per_head
        self.log_buckets_from, self.num_log_buckets = log_buckets_from, num_log_buckets
        num_buckets = len(self.lower_edges) + 1
        self.table = nn.Parameter(torch.zeros(num_heads, num_buckets) if per_head else torch.zeros(num_buckets))
        self.scale = nn.Parameter(torch.ones(())) if learnable_scale else None

    def bucket_labels(self) -> list[str]:
        """One label per bucket, e.g. ``["0", "1", ..., ">=10", "unreachable"]`` (ranges as ``"8-15"``)."""
        edges = self.lower_edges
        labels = [str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}" for lo, hi in pairwise(edges)]
        return labels + [f">={edges[-1]}", "unreachable"]

    def bucket_index(self, structure: Structure, batch_size: int, device: torch.device) -> torch.Tensor:
        """``(b, n, n)`` bucket codes (see :func:`structattn.attention.bucket_bias.bucket_index`)."""
        return distance_buckets(structure, batch_size, device, self.lower_edges)[0]

    def effective_table(self) -> torch.Tensor:
        """``scale * table``: ``(K)`` or ``(h, K)``."""
        return self.table if self.scale is None else self.scale * self.table

    def bucket_bias(
        self, structure: Structure, batch_size: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fast path of :class:`BiasedAttention`: ``(scale * table, bucket codes (b, n, n))``."""
        return self.effective_table(), self.bucket_index(structure, batch_size, device)

    def bias(
        self, structure: Structure, batch_size: int, num_heads: int, device: torch.device, dtype: torch.dtype
    ) -> torch.Tensor:
        """Additive score bias ``scale * table[bucket]``, without masking: ``0`` on pairs with a padded token.

        Shapes:
            returns ``(b, 1, n, n)`` (shared table) or ``(b, h, n, n)`` (``per_head=True``).
        """
        index = self.bucket_index(structure, batch_size, device)
        return bb.gather_bias(bb.extend_table(self.effective_table().to(device), 0.0, dtype), index)

    def learned_quantities(self) -> list[LearnedQuantity]:
        """The effective table ``scale * table`` as ``(1 or h, K)`` with the bucket labels."""
        table = self.effective_table().detach()
        return [LearnedQuantity("bias", table.reshape(-1, table.shape[-1]), self.bucket_labels())]

    def extra_repr(self) -> str:
        return f"buckets={self.bucket_labels()}, per_head={self.per_head}, backend={self.backend!r}"
