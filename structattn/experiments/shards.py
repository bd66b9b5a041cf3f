"""Sharded comparisons: which runs a shard does (``--shard i/N``), and merging shard directories back into the
tables an unsharded run would have written.

A shard takes the runs whose index ``k`` (their place in :meth:`Comparison.runs`) has ``k % N == i``. Every
output directory holds ``comparison.json`` (a fingerprint of the declared comparison, the number of runs,
the shard and its run indices) and ``runs/<run_id>.json`` (one record per run); merging checks the
fingerprints, that every run is present, and rebuilds tables and plots from the records in run order.

``structattn compare --out DIR --shard i/N`` writes into ``DIR/shard-i-of-N/`` (:func:`shard_folder`), so that
shards given the same ``--out`` (on a shared folder, or copied together afterwards) never collide, and
``structattn merge DIR`` finds them (:func:`shard_folders`)::

    structattn compare CONFIG --out runs/x --shard 0/2    # machine A -> runs/x/shard-0-of-2/
    structattn compare CONFIG --out runs/x --shard 1/2    # machine B -> runs/x/shard-1-of-2/
    structattn merge runs/x                               # -> runs/x/merged/
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from structattn import plugins
from structattn.experiments.compare import report
from structattn.experiments.provenance import environment
from structattn.experiments.outputs import COMPARE_OUTPUTS, check_output_folder, clear_outputs
from structattn.experiments.record_checks import data_sha256, write_atomic, write_record_file
from structattn.experiments.records import read_manifest, read_records, shard_folders
from structattn.training.precision import record_precision


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


def shard_folder(out: str | Path, shard: tuple[int, int] | None) -> Path:
    """Where shard ``(i, N)`` of a comparison given ``--out out`` writes: ``out/shard-i-of-N`` (``out`` itself
    when not sharded)."""
    return Path(out) if shard is None else Path(out) / f"shard-{shard[0]}-of-{shard[1]}"


def merge(dirs: Sequence[str | Path], out_dir: str | Path, plots: bool = True,
          mode: str = "refuse", partial: bool = False) -> list[dict[str, Any]]:
    """Merge shard directories of one comparison into ``out_dir`` (same tables as an unsharded run, the
    significance tests recomputed from the records' per-item outputs against the manifests' ``reference``;
    manifests without one: the default reference).

    Each of ``dirs`` is a compare folder or a folder holding ``shard-i-of-N`` ones (:func:`shard_folders`).
    Every record is checked against its folder's manifest (fingerprint, declared run indices, run ids and
    seeds; see :mod:`structattn.experiments.records`) and for damage (fields, checksum, per-item outputs
    against metrics: :mod:`structattn.experiments.record_checks`); the runs must share one precision and, per
    task, one data checksum (:func:`check_same_runs`). ``mode``: ``"refuse"`` an ``out_dir`` that holds
    compare outputs, or ``"overwrite"`` them. ``partial``: merge the runs present even when some of the
    comparison's runs are in no directory (a comparison whose shards are still training): the tables say
    "Partial: k of N runs", ``comparison.json`` lists the ``missing`` run indices, and each significance test
    pairs only the seeds both settings have.

    Raises:
        RecordError: a damaged record, named by its file and field.
        ValueError: directories of different comparisons or references, a stray record (named by its file), a
            run in two directories, runs of different precisions or data checksums (naming both folders), runs missing from every shard, or a used ``out_dir``.
    """
    manifests, records = [], {}
    out = Path(out_dir)
    for d in [folder for given in dirs for folder in shard_folders(given)]:
        if out.resolve() == d.resolve():
            raise ValueError(f"--out {str(out)!r} is one of the directories being merged; give another folder")
        manifest = read_manifest(d)
        manifests.append((d, manifest))
        _replay_plugins(d)
        for index, (path, record) in read_records(d, manifest).items():
            if index in records:
                raise ValueError(f"run {index} is in both {str(records[index][0])!r} and {str(path)!r}")
            records[index] = (path, record)
    check_same_runs(list(records.values()))
    first_dir, first = manifests[0]
    for d, m in manifests[1:]:
        if m["fingerprint"] != first["fingerprint"]:
            raise ValueError(f"{str(d)!r} holds a different comparison than {str(first_dir)!r} (config differs)")
        if m.get("reference") != first.get("reference"):
            raise ValueError(f"{str(d)!r} tests against reference setting {m.get('reference')!r} but "
                             f"{str(first_dir)!r} against {first.get('reference')!r} (compare.reference differs)")
    missing = sorted(set(range(first["runs"])) - set(records))
    if missing and not partial:
        raise ValueError(f"runs {missing} are in none of the directories; run their shards first, or pass --partial "
                         "to merge the runs present")
    used = check_output_folder(out, COMPARE_OUTPUTS, "overwrite" if mode == "overwrite" else "refuse",
                               remedy="pass --overwrite to replace them")
    clear_outputs(out, used, "structattn merge")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "config.gin", (first_dir / "config.gin").read_text())
    ordered = [records[k][1] for k in sorted(records)]
    run_ids = [r["run_id"] for r in ordered]
    write_atomic(out / "comparison.json", json.dumps({
        **first, "shard": None, "indices": sorted(records), "run_ids": run_ids,
        "seeds": sorted({r["seed"] for r in ordered}), "merged_from": [str(d) for d, _ in manifests],
        "missing": missing}, indent=1))
    # as written (stamped), with references that were read again from the corpus kept in memory for the tables
    ordered = [{**r, "checksum": write_record_file(out / "runs" / f"{r['run_id']}.json", r)["checksum"]}
               for r in ordered]
    report(ordered, out, first["runs"], plots, reference=first.get("reference"))
    write_atomic(out / "provenance.json", json.dumps({**environment(), "merged_from": {
        str(d): _read_provenance(d) for d, _ in manifests}}, indent=1))
    return ordered


def check_same_runs(found: Sequence[tuple[Path, dict[str, Any]]]) -> None:
    """Refuse runs of one comparison that trained in different precisions, or runs of one task that read data
    of different checksums (another corpus version), naming both folders and records.

    Args:
        found: ``(record file, record)`` of every run to be merged (the file in ``FOLDER/runs/``).

    Raises:
        ValueError: the first two records that differ.
    """
    first_precision = None
    first_data: dict[str, tuple[Path, Path, str]] = {}
    for path, record in found:
        folder = path.parent.parent
        precision = record_precision(record)
        if first_precision is None:
            first_precision = (path, folder, precision)
        elif precision != first_precision[2]:
            raise ValueError(f"{str(folder)!r} trained in {precision} ({path.name}) but {str(first_precision[1])!r} in "
                             f"{first_precision[2]} ({first_precision[0].name}); a comparison's runs need one precision "
                             "(training.precision 'auto' resolves per machine: bind 'fp32' or 'bf16' and rerun one "
                             "of them)")
        sha = data_sha256(record)
        if sha is None:
            continue
        seen = first_data.setdefault(record["task_label"], (path, folder, sha))
        if seen[2] != sha:
            raise ValueError(f"{str(folder)!r} trained task {record['task_label']!r} on data sha256 {sha[:16]} "
                             f"({path.name}) but {str(seen[1])!r} on {seen[2][:16]} ({seen[0].name}): the corpus "
                             "changed between them (another version or path); rerun one of them on the same data")


def _read_provenance(folder: Path) -> dict[str, Any] | None:
    """``folder/provenance.json`` (``None`` when there is none).

    Raises:
        ValueError: the file is not valid JSON (named: truncated or half-written).
    """
    path = folder / "provenance.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(path)!r} is not valid JSON ({err}): truncated or half-written? restore it from where "
                         "the shard ran, or rerun that shard") from None


def _replay_plugins(folder: Path) -> None:
    """Import the plugins the folder's runs recorded (its provenance.json), before reading anything else."""
    recorded = _read_provenance(folder) or {}
    plugins.replay(recorded.get("plugins"), recorded_by=f"the compare folder {str(folder)!r}")
