"""Keep a finished compare folder as evidence: the small files a repository may hold, without corpus text.

``structattn keep SRC DEST`` (:func:`keep`) copies what the tables, the significance tests and a reader need
from a finished compare folder (or one shard folder of it) into ``DEST``, e.g. ``results/<name>/``: the manifest,
the operative config, provenance, the tables, each run's record and the per-step training log. Checkpoints,
plots, caches and anything else stay behind. Every record is checked as it is read (fields, checksum, scores
recomputed from its outputs), rewritten without corpus text (references of tasks with a reference source, e.g.
Multi30k: :mod:`structattn.experiments.references`), and the kept folder is read back once, references
restored from the corpus and scores recomputed, before ``keep`` returns: a kept folder always reads.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from structattn.experiments.record_checks import write_record_file
from structattn.experiments.records import read_manifest, read_records
from structattn.experiments.references import strip_references

#: files of a compare folder that are kept (when present)
KEPT_FILES = ("comparison.json", "config.gin", "provenance.json", "results.csv", "results.md", "significance.csv")
#: per-run files kept beside the record (``runs/<run_id>/``): the training log, a line per logged step
KEPT_RUN_FILES = ("log.jsonl",)
#: a kept file larger than this is refused: evidence is small, a large file is a checkpoint or a corpus
MAX_BYTES = 5_000_000


def keep(src: str | Path, dest: str | Path, overwrite: bool = False, partial: bool = False) -> list[dict[str, Any]]:
    """Copy the finished compare folder ``src`` into ``dest`` as committed evidence (see the module docstring);
    the kept records. ``partial``: keep the finished runs of a folder whose other runs still train (the kept
    manifest still declares every run, so tables built from it say which part they cover; keep the folder
    again with ``overwrite`` once it has finished).

    Raises:
        FileNotFoundError: ``src`` is not a compare folder.
        ValueError: a run of ``src`` has not finished (named; unless ``partial``), ``dest`` holds files and ``overwrite`` is not
            set, ``dest`` is ``src``, or a file to keep is larger than :data:`MAX_BYTES`.
        RecordError: a damaged record in ``src`` (named by its file).
    """
    src, dest = Path(src), Path(dest)
    manifest = read_manifest(src)
    if dest.resolve() == src.resolve():
        raise ValueError(f"keep: {str(dest)!r} is the folder being kept; give another destination")
    found = read_records(src, manifest)
    unfinished = [run_id for index, run_id in zip(manifest.get("indices", []), manifest.get("run_ids") or [])
                  if index not in found]
    if unfinished and not partial:
        raise ValueError(f"keep: {str(src)!r} has runs without a record (not finished yet?): {', '.join(unfinished)}; "
                         "finish them (compare ... --resume) before keeping the folder, or pass --partial to keep "
                         "the finished ones")
    if dest.exists() and any(dest.iterdir()) and not overwrite:
        raise ValueError(f"keep: {str(dest)!r} already holds files; pass --overwrite to replace them")
    sources = [src / name for name in KEPT_FILES if (src / name).is_file()]
    if (src / "runs" / "log.csv").is_file():
        sources.append(src / "runs" / "log.csv")
    sources += [src / "runs" / record["run_id"] / name for _, record in found.values() for name in KEPT_RUN_FILES
                if (src / "runs" / record["run_id"] / name).is_file()]
    for path in sources:
        if path.stat().st_size > MAX_BYTES:
            raise ValueError(f"keep: {str(path)!r} is {path.stat().st_size:,} bytes, more than evidence needs "
                             f"({MAX_BYTES:,}); it is not kept")
    # Written beside ``dest`` and read back there first: a keep that fails (a record that does not read back, e.g.
    # without STRUCTATTN_MULTI30K to restore its references) leaves ``dest`` as it was, never half-written.
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.keep-", dir=dest.parent))
    try:
        for path in sources:
            target = staging / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        for path, record in found.values():
            write_record_file(staging / "runs" / path.name, strip_references(record))
        read_records(staging, read_manifest(staging))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if dest.exists():
        shutil.rmtree(dest)
    staging.rename(dest)
    return [record for _, (_, record) in sorted(read_records(dest, read_manifest(dest)).items())]

__all__ = ["KEPT_FILES", "MAX_BYTES", "keep"]
