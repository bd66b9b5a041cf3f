"""Sharded comparisons: which runs a shard does (``--shard i/N``), and merging shard directories back into the
tables an unsharded run would have written.

A shard takes the runs whose index ``k`` (their place in :meth:`Comparison.runs`) has ``k % N == i``. Every
output directory holds ``comparison.json`` (a fingerprint of the declared comparison, the number of runs,
the shard and its run indices) and ``runs/<run_id>.json`` (one record per run); merging checks the
fingerprints, that every run is present, and rebuilds tables and plots from the records in run order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from structattn.experiments.compare import report


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"i/N"`` -> ``(i, N)`` with ``0 <= i < N`` (0-based, like process ranks)."""
    if text is None:
        return None
    index, slash, count = str(text).partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise ValueError(f"--shard must look like i/N (e.g. 0/2), got {text!r}") from None
    if not slash or n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard {text!r}: need 0 <= i < N (shards are numbered from 0)")
    return i, n


def merge(dirs: Sequence[str | Path], out_dir: str | Path, plots: bool = True) -> list[dict[str, Any]]:
    """Merge shard directories of one comparison into ``out_dir`` (same tables as an unsharded run).

    Raises:
        ValueError: directories of different comparisons, or runs missing from every shard.
    """
    manifests, records = [], {}
    for d in map(Path, dirs):
        path = d / "comparison.json"
        if not path.is_file():
            raise FileNotFoundError(f"{str(d)!r} is not a compare output directory (no comparison.json)")
        manifests.append((d, json.loads(path.read_text())))
        for f in sorted((d / "runs").glob("*.json")):
            record = json.loads(f.read_text())
            records[record["index"]] = record
    first_dir, first = manifests[0]
    for d, m in manifests[1:]:
        if m["fingerprint"] != first["fingerprint"]:
            raise ValueError(f"{str(d)!r} holds a different comparison than {str(first_dir)!r} (config differs)")
    missing = sorted(set(range(first["runs"])) - set(records))
    if missing:
        raise ValueError(f"runs {missing} are in none of the directories; run their shards first")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.gin").write_text((first_dir / "config.gin").read_text())
    (out / "comparison.json").write_text(json.dumps({**first, "shard": None, "indices": sorted(records),
                                                     "merged_from": [str(d) for d, _ in manifests]}, indent=1))
    (out / "runs").mkdir(exist_ok=True)
    ordered = [records[k] for k in sorted(records)]
    for r in ordered:
        (out / "runs" / f"{r['run_id']}.json").write_text(json.dumps(r))
    report(ordered, out, first["runs"], plots)
    return ordered
