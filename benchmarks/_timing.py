"""Timing shared by the benchmark scripts: clocks and the best of interleaved rounds.

A figure is the best (least disturbed) round; baseline and variant alternate (base, other, base, other, ...)
so that a busy machine slows both alike.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed(fn: Callable[[], None], clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds one call of ``fn`` takes on ``clock``."""
    start = clock()
    fn()
    return clock() - start


def best_pair(base: Callable[[], None], other: Callable[[], None], rounds: int,
              clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """Best time of ``base`` and of ``other`` over ``rounds`` interleaved rounds, after one warm-up call of each
    (first-call allocations, lazy kernels)."""
    timed(base, clock), timed(other, clock)
    pairs = [(timed(base, clock), timed(other, clock)) for _ in range(rounds)]
    return min(p[0] for p in pairs), min(p[1] for p in pairs)


def without_gc(fn: Callable[[], object]) -> Callable[[], None]:
    """``fn`` as a call that runs with the garbage collector off (a collection inside a timed call is noise)."""
    def call() -> None:
        gc.disable()
        try:
            fn()
        finally:
            gc.enable()
    return call
