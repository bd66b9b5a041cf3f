"""Parsing a large input in shards on a Dask cluster (optional extra: ``pip install 'structattn[dask]'``).

The same shards as :func:`~structattn.structures.annotators.sharding.parse_sharded`, the same shard files
(``OUT.shard-XXXX.conllu``, written atomically by the workers) and the same merge
(:func:`~structattn.structures.annotators.sharding.merge_shards`), so the merged output is byte-identical
to a single-process parse. Each Dask worker loads the parser once and keeps it for every later shard of the
same annotator settings. The workers write the shard files (and the optional annotation cache) themselves:
``out`` and ``cache_dir`` must be on a file system every worker and this process see (a local cluster, or a
shared/NFS mount on a real one).

Example::

    from dask.distributed import Client, LocalCluster
    with LocalCluster(n_workers=4, threads_per_worker=1) as cluster, Client(cluster) as client:
        parse_sharded_dask(client, SpacyAnnotator(), texts, "out.conllu", num_shards=16)
        merge_shards(find_shards("out.conllu"), out="out.conllu")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

from structattn.structures.annotators.base import Annotator, text_ids_for
from structattn.structures.annotators.sharding import ShardResult, parse_into_shard, shard_path, split_ranges
from structattn.structures.cache import AnnotationCache

#: per worker process: (annotator options, cache folder) -> (loaded annotator, cache)
_LOADED: dict[str, tuple[Annotator, AnnotationCache | None]] = {}


def import_distributed() -> Any:
    """``dask.distributed``, or an ImportError that says how to install it."""
    try:
        import dask.distributed as distributed
    except ImportError as error:
        raise ImportError("parsing on a Dask cluster needs dask: `pip install 'structattn[dask]'`") from error
    return distributed


def _worker_state(annotator: Annotator, cache_dir: str | None) -> tuple[Annotator, AnnotationCache | None]:
    key = json.dumps([type(annotator).__qualname__, annotator.options(), cache_dir], sort_keys=True, default=str)
    if key not in _LOADED:
        _LOADED[key] = (annotator, None if cache_dir is None else AnnotationCache(cache_dir))
    return _LOADED[key]


def parse_shard_task(annotator: Annotator, cache_dir: str | None, texts: list[str], text_ids: list[Any], path: str) -> ShardResult:
    """Run on a worker: parse one shard with the worker's loaded annotator and write ``path`` atomically."""
    annotator, cache = _worker_state(annotator, cache_dir)
    return parse_into_shard(annotator, cache, texts, text_ids, path)


def parse_sharded_dask(
    client: Any,
    annotator: Annotator,
    texts: Sequence[str],
    out: str | Path,
    text_ids: Sequence[Any] | None = None,
    num_shards: int | None = None,
    cache_dir: str | Path | None = None,
    on_shard_done: Callable[[ShardResult], None] | None = None,
) -> list[ShardResult]:
    """Parse ``texts`` in ``num_shards`` shards (default: one per worker) on the workers of ``client``.

    Args:
        client: a ``dask.distributed.Client``.
        annotator: a not-yet-loaded annotator (pickled to the workers without its model).
        texts, text_ids, out, cache_dir, on_shard_done: as in
            :func:`~structattn.structures.annotators.sharding.parse_sharded`.

    Returns:
        One :class:`ShardResult` per shard, in shard order. A failed shard re-raises its worker's error.
    """
    distributed = import_distributed()
    ids = text_ids_for(texts, text_ids)
    workers = len(client.scheduler_info().get("workers", {}))
    ranges = split_ranges(len(texts), num_shards or max(workers, 1))
    cache = None if cache_dir is None else str(cache_dir)
    futures = [client.submit(parse_shard_task, annotator, cache, [texts[i] for i in r], [ids[i] for i in r],
                             str(shard_path(out, k)), pure=False)  # pure=False: a fresh key per shard and call
               for k, r in enumerate(ranges)]
    index = {f.key: k for k, f in enumerate(futures)}
    results: list[ShardResult | None] = [None] * len(ranges)
    try:
        for future in distributed.as_completed(futures):
            results[index[future.key]] = future.result()
            if on_shard_done is not None:
                on_shard_done(results[index[future.key]])  # type: ignore[arg-type]
    except BaseException:
        client.cancel(futures)
        raise
    return results  # type: ignore[return-value]
