"""Parsing a large input in shards over local worker processes.

The texts are cut into contiguous shards; a process pool (each worker loads the model once) parses them and
writes ``OUT.shard-0000.conllu``, ``OUT.shard-0001.conllu``, ... atomically. :func:`merge_shards` reads
them back with ``read_conllu`` and joins them in shard order. Sentence ids come from the global text ids, so
the merged result equals a single-process run. With an :class:`AnnotationCache` directory the workers share
one cache, and a rerun after an interruption parses only what was not cached yet.
"""

from __future__ import annotations

import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

from structattn.structures.annotators.base import Annotator, text_ids_for
from structattn.structures.cache import AnnotationCache, write_atomic
from structattn.structures.readers import read_conllu, write_conllu
from structattn.structures.sentence import Sentence

_SHARD = re.compile(r"\.shard-(\d{4,})$")


class ShardResult(NamedTuple):
    """What one worker did: the file written, texts and sentences in it, and its cache hits / misses."""

    path: Path
    texts: int
    sentences: int
    cache_hits: int
    cache_misses: int


def shard_path(out: str | Path, index: int) -> Path:
    """``OUT.shard-XXXX.conllu`` for the output ``OUT.conllu``."""
    out = Path(out)
    return out.with_name(f"{out.stem}.shard-{index:04d}{out.suffix or '.conllu'}")


def split_ranges(count: int, num_shards: int) -> list[range]:
    """Contiguous, non-empty index ranges of near-equal size (sizes differ by at most one)."""
    if count < 1 or num_shards < 1:
        raise ValueError(f"cannot split {count} texts into {num_shards} shards")
    num_shards = min(num_shards, count)
    size, extra = divmod(count, num_shards)
    bounds = [k * size + min(k, extra) for k in range(num_shards + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


_WORKER: dict[str, Any] = {}


def _start_worker(annotator: Annotator, cache_dir: str | None) -> None:
    _WORKER["annotator"] = annotator
    _WORKER["cache"] = None if cache_dir is None else AnnotationCache(cache_dir)


def parse_into_shard(
    annotator: Annotator, cache: AnnotationCache | None, texts: list[str], text_ids: list[Any], path: str
) -> ShardResult:
    """Parse one shard (through ``cache`` when given), write it to ``path`` atomically, count cache use."""
    before = cache.stats() if cache is not None else {"hits": 0, "misses": 0}
    sentences = annotator.annotate(texts, text_ids, cache)
    write_atomic(Path(path), write_conllu(sentences).encode("utf-8"))
    after = cache.stats() if cache is not None else before
    return ShardResult(Path(path), len(texts), len(sentences), after["hits"] - before["hits"],
                       after["misses"] - before["misses"])


def _parse_shard(texts: list[str], text_ids: list[Any], path: str) -> ShardResult:
    return parse_into_shard(_WORKER["annotator"], _WORKER["cache"], texts, text_ids, path)


def parse_sharded(
    annotator: Annotator,
    texts: Sequence[str],
    out: str | Path,
    processes: int,
    text_ids: Sequence[Any] | None = None,
    num_shards: int | None = None,
    cache_dir: str | Path | None = None,
    on_shard_done: Callable[[ShardResult], None] | None = None,
    start_method: str | None = None,
) -> list[ShardResult]:
    """Parse ``texts`` in ``num_shards`` shards (default: ``processes``) on ``processes`` worker processes.

    Args:
        annotator: a not-yet-loaded annotator; it is pickled to each worker, which loads the model once.
        texts: the raw texts; ``text_ids`` as in :meth:`Annotator.annotate` (default: positions).
        out: the final output path; shards are written next to it (see :func:`shard_path`).
        cache_dir: an :class:`AnnotationCache` directory shared by the workers.
        on_shard_done: called in this process as each shard finishes (progress bars).
        start_method: multiprocessing start method; default ``"fork"`` where the platform has it (workers
            start in a fraction of a second; they only parse, no torch kernels), else ``"spawn"``.

    Returns:
        One :class:`ShardResult` per shard, in shard order.
    """
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    ids = text_ids_for(texts, text_ids)
    ranges = split_ranges(len(texts), num_shards or processes)
    if start_method is None:
        start_method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(start_method)
    results: list[ShardResult | None] = [None] * len(ranges)
    cache = None if cache_dir is None else str(cache_dir)
    with ProcessPoolExecutor(processes, mp_context=context, initializer=_start_worker, initargs=(annotator, cache)) as pool:
        futures = {pool.submit(_parse_shard, [texts[i] for i in r], [ids[i] for i in r], str(shard_path(out, k))): k
                   for k, r in enumerate(ranges)}
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if on_shard_done is not None:
                    on_shard_done(results[futures[future]])  # type: ignore[arg-type]
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return results  # type: ignore[return-value]


def find_shards(out: str | Path) -> list[Path]:
    """The shard files of ``out`` that exist, in shard order."""
    out = Path(out)
    pattern = f"{out.stem}.shard-*{out.suffix or '.conllu'}"
    return sorted(out.parent.glob(pattern), key=lambda p: _shard_index(p))


def _shard_index(path: Path) -> int:
    match = _SHARD.search(Path(path).stem)
    if match is None:
        raise ValueError(f"{path} is not a shard file (expected NAME.shard-XXXX.conllu)")
    return int(match.group(1))


def merge_shards(paths: Sequence[str | Path], out: str | Path | None = None) -> list[Sentence]:
    """Read shard files and join their sentences in shard order (optionally writing them to ``out``).

    Raises:
        ValueError: a name that is not a shard file, or a gap in the shard numbers (a shard is missing).
    """
    if not paths:
        raise ValueError("merge_shards: no shard files given")
    ordered = sorted((Path(p) for p in paths), key=_shard_index)
    indices = [_shard_index(p) for p in ordered]
    if indices != list(range(len(ordered))):
        missing = sorted(set(range(max(indices) + 1)) - set(indices))
        raise ValueError(f"merge_shards: shard(s) {missing or indices} missing or duplicated among {[str(p) for p in ordered]}")
    sentences = [s for p in ordered for s in read_conllu(p)]
    if out is not None:
        write_atomic(Path(out), write_conllu(sentences).encode("utf-8"))
    return sentences
