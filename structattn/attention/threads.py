"""Per-sentence loops of small ops on worker threads with single-threaded kernels."""

from __future__ import annotations

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
    Do not run torch work in other threads of the process meanwhile. ``fn`` runs with grad mode on in the
    workers: decorate it with ``torch.no_grad()`` where needed.
    """
    items = list(items)
    threads = torch.get_num_threads()
    if not PARALLEL_BLOCKS or device.type != "cpu" or threads == 1 or len(items) < 2:
        return [fn(x) for x in items]
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(min(threads, len(items))) as pool:
            return list(pool.map(fn, items))
    finally:
        torch.set_num_threads(threads)
