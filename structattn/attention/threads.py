"""Per-sentence loops of small ops on worker threads with single-threaded kernels."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

T = TypeVar("T")
R = TypeVar("R")


#: Run per-sentence loops (bucketing, bias gathering, the backward tasks of :class:`BucketBiasSDPA`) on
#: ``torch.get_num_threads()`` Python threads with single-threaded torch ops (see :func:`per_sentence`).
PARALLEL_BLOCKS = True


def per_sentence(fn: Callable[[T], R], items: Iterable[T], device: torch.device) -> list[R]:
    """``[fn(x) for x in items]``; on CPU (with :data:`PARALLEL_BLOCKS`) spread over
    ``torch.get_num_threads()`` Python threads while the process-wide torch thread count is 1 (restored after).

    Loops of small tensor ops with multi-threaded kernels pay an OpenMP barrier per op, which on a busy
    machine made them 5-10x slower; single-threaded ops on worker threads (torch releases the GIL) avoid it.
    The workers persist between calls (:func:`_workers`): a pool started per call cost about 0.7 ms, and the
    first ops of each fresh thread several ms more (8 products of 256 x 256 matrices: 5.0 ms on fresh
    threads, 1.5 ms on kept ones). Do not run torch work in other threads of the process meanwhile. ``fn``
    runs with grad mode on in the workers: decorate it with ``torch.no_grad()`` where needed.
    """
    items = list(items)
    if not pooled(len(items), device):
        return [fn(x) for x in items]
    threads = torch.get_num_threads()
    pool = _workers(threads)
    torch.set_num_threads(1)
    try:
        return list(pool.map(fn, items))
    finally:
        torch.set_num_threads(threads)


def pooled(count: int, device: torch.device) -> bool:
    """Whether :func:`per_sentence` spreads ``count`` items over worker threads (else a plain loop)."""
    return PARALLEL_BLOCKS and device.type == "cpu" and torch.get_num_threads() > 1 and count > 1


_POOL: tuple[int, int, ThreadPoolExecutor] | None = None  # (process id, workers, pool)
_POOL_LOCK = threading.Lock()


def _workers(count: int) -> ThreadPoolExecutor:
    """The process's worker pool of ``count`` threads, started on first use and kept; a new one after a fork
    (a child inherits the pool object but not its threads) or for another thread count."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid() or _POOL[1] != count:
            if _POOL is not None and _POOL[0] == os.getpid():
                _POOL[2].shutdown(wait=False)
            _POOL = (os.getpid(), count, ThreadPoolExecutor(count, thread_name_prefix="structattn-worker"))
        return _POOL[2]
