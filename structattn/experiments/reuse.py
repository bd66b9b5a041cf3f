"""Reusing finished runs of other comparisons (``structattn compare ... --reuse FOLDER``).

A run is defined by its *run key* (:meth:`structattn.experiments.compare.Comparison.run_key`): a hash of its
task spec, attention plan, seed and setup (with its setting's ``training_by_setting`` applied), and of nothing
else: no labels, no other runs. Two comparisons that declare the same run under other labels (a task both call
by another name) give it the same key. Before a comparison trains, each of its runs that is not finished yet is
looked up by key among the records of the reuse folders (compare folders, kept folders, or folders of shard
folders, every record checked as it is read: :func:`structattn.experiments.records.read_records`); a match is
copied in as this comparison's record (:func:`reused_record`) instead of being trained again.

A match is refused, naming both files, when it trained in another precision than this comparison's resolves to,
when its data checksum differs from another run of the same task (finished in the output folder or reused), or
when the reuse folders hold two matches for one run whose metrics differ. Records written before records carried
a ``run_key`` never match.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from structattn.experiments.record_checks import data_sha256, parse_record, write_record_file
from structattn.experiments.records import read_manifest, read_records, shard_folders
from structattn.experiments.spec import RunSpec
from structattn.training.precision import record_precision

#: per-run files copied with a reused record (``runs/<run_id>/``), when present: the training log (a kept folder
#: holds only ``log.jsonl``); checkpoints stay behind
REUSED_RUN_FILES = ("log.jsonl", "log.csv")


@dataclass(frozen=True)
class Match:
    """A finished run of another comparison, read from ``path`` (``FOLDER/runs/<run_id>.json``)."""

    path: Path
    record: dict[str, Any]

    @property
    def folder(self) -> Path:
        return self.path.parent.parent


@dataclass(frozen=True)
class Wanted:
    """A run of this comparison to look up: its spec, its run key and the precision it trains in here."""

    spec: RunSpec
    run_key: str
    precision: str


def reuse_folders(given: Sequence[str | Path], out: Path) -> list[Path]:
    """The compare folders that the ``--reuse`` folders stand for (each a compare folder, a kept folder, or a
    folder of ``shard-i-of-N`` ones).

    Raises:
        ValueError: a folder that does not exist, is not a compare folder, or is the output folder ``out``.
    """
    folders = []
    for folder in map(Path, given):
        if not folder.is_dir():
            raise ValueError(f"--reuse {str(folder)!r}: no such folder")
        try:
            found = shard_folders(folder)
        except FileNotFoundError as err:
            raise ValueError(f"--reuse {str(folder)!r}: {err}") from None
        for compare_folder in found:
            if compare_folder.resolve() == out.resolve():
                raise ValueError(f"--reuse {str(folder)!r} is the output folder {str(out)!r}: its finished runs are "
                                 "kept with --resume")
        folders += found
    return folders


def read_candidates(folders: Sequence[Path]) -> dict[str, list[Match]]:
    """The records of ``folders`` that carry a run key, by key (in folder and run order), each checked as it is
    read (fields, checksum, outputs; kept records get their references back from the corpus).

    Raises:
        RecordError, ValueError: a damaged or stray record (named by its file).
    """
    candidates: dict[str, list[Match]] = {}
    for folder in folders:
        for _, (path, record) in sorted(read_records(folder, read_manifest(folder)).items()):
            if isinstance(record.get("run_key"), str):
                candidates.setdefault(record["run_key"], []).append(Match(path, record))
    return candidates


def add_run_keys(folder: str | Path, comparison: Any) -> list[Path]:
    """Give the records of ``folder`` (a compare folder, a kept one, or a folder of shard folders) that predate run
    keys the key ``comparison`` gives their run, so that ``--reuse`` finds them; the records that changed.

    ``comparison`` (a :class:`~structattn.experiments.compare.Comparison`, declared from the config the folder was
    run with) must be the one that trained them: every record's fingerprint must equal ``comparison``'s, which
    holds only when its tasks, settings, seeds and setup are the same, so the key written is the one the run would
    have carried. Each record is read with every check (checksum included), gets ``run_key`` and nothing else, and
    is stamped again; a record that already carries a key is left as it is, after checking that key.

    Raises:
        ValueError: a record of another comparison (its fingerprint differs), one whose run ``comparison`` does
            not declare, or one whose key differs from ``comparison``'s (naming the file).
    """
    fingerprint = comparison.fingerprint()
    specs = {spec.run_id: spec for spec in comparison.runs()}
    changed = []
    for compare_folder in shard_folders(folder):
        for _, (path, record) in sorted(read_records(compare_folder, read_manifest(compare_folder)).items()):
            if record.get("fingerprint") != fingerprint:
                raise ValueError(f"{str(path)!r} was trained by another comparison (fingerprint "
                                 f"{record.get('fingerprint')}, the config given declares {fingerprint}): declare "
                                 "the comparison from the config and --gin-param bindings the folder was run with")
            spec = specs.get(record.get("run_id"))
            if spec is None:
                raise ValueError(f"{str(path)!r}: the config given declares no run {record.get('run_id')!r}")
            key = comparison.run_key(spec)
            if "run_key" in record:
                if record["run_key"] != key:
                    raise ValueError(f"{str(path)!r} carries run key {record['run_key']!r}, but the config given "
                                     f"makes it {key!r}")
                continue
            write_record_file(path, {**parse_record(path), "run_key": key})  # as stored: nothing read-time added
            changed.append(path)
    return changed


def find_matches(candidates: Mapping[str, Sequence[Match]], wanted: Sequence[Wanted],
                 finished: Mapping[int, tuple[Path, Mapping[str, Any]]], out: Path) -> dict[int, Match]:
    """The match of each run in ``wanted`` that has one (by run index), checked against this comparison's
    precision and against the data checksums of the ``finished`` runs (``{index: (file, record)}`` of the output
    folder ``out``) and of each other.

    Raises:
        ValueError: two matches of one run with different metrics, a match of another precision, or of data
            that differs from another run of the same task (naming both files).
    """
    matches = {}
    for run in wanted:
        found = list(candidates.get(run.run_key, ()))
        if not found:
            continue
        for other in found[1:]:
            if other.record["metrics"] != found[0].record["metrics"]:
                raise ValueError(f"--reuse: run {run.spec.run_id} matches both {str(found[0].path)!r} and "
                                 f"{str(other.path)!r}, whose metrics differ ({found[0].record['metrics']} and "
                                 f"{other.record['metrics']}); reuse only one of their folders")
        precision = record_precision(found[0].record)
        if precision != run.precision:
            target = out / "runs" / f"{run.spec.run_id}.json"
            raise ValueError(f"--reuse: {str(found[0].path)!r} trained in {precision}, but this comparison's "
                             f"training.precision means {run.precision} here, so it cannot be {str(target)!r} "
                             f"('auto' resolves per machine); run on a machine where it means {precision}, or leave "
                             "out that --reuse folder")
        matches[run.spec.index] = found[0]
    _check_data(matches, {run.spec.index: run.spec for run in wanted}, finished)
    return matches


def _check_data(matches: Mapping[int, Match], specs: Mapping[int, RunSpec],
                finished: Mapping[int, tuple[Path, Mapping[str, Any]]]) -> None:
    """Refuse a match whose data checksum differs from another run of the same task (of this comparison)."""
    seen: dict[str, tuple[Path, str]] = {}
    for path, record in finished.values():
        sha = data_sha256(record)
        if sha is not None:
            seen.setdefault(record["task_label"], (path, sha))
    for index, match in sorted(matches.items()):
        sha, label = data_sha256(match.record), specs[index].task_label
        if sha is None:
            continue
        first = seen.setdefault(label, (match.path, sha))
        if first[1] != sha:
            raise ValueError(f"--reuse: {str(match.path)!r} trained task {label!r} on data sha256 {sha[:16]} but "
                             f"{str(first[0])!r} on {first[1][:16]}: the corpus changed between them (another version "
                             "or path); reuse runs trained on the same data")


def reused_record(match: Match, spec: RunSpec, fingerprint: str) -> dict[str, Any]:
    """``match``'s record as this comparison's run ``spec``: index, labels, run id and ``fingerprint`` are this
    run's, everything else (metrics, history, predictions, provenance) as it was, plus
    ``provenance.reused_from`` (the folder, run id and fingerprint it came from)."""
    old = match.record
    origin = {"folder": str(match.folder), "run_id": old["run_id"], "fingerprint": old.get("fingerprint")}
    record = {k: v for k, v in old.items() if k != "checksum"}
    return {**record, "index": spec.index, "task_label": spec.task_label, "setting": spec.setting,
            "run_id": spec.run_id, "fingerprint": fingerprint,
            "provenance": {**(old.get("provenance") or {}), "reused_from": origin}}


def copy_run_files(match: Match, run_folder: Path) -> None:
    """Copy the match's training log (:data:`REUSED_RUN_FILES`, when present) into ``run_folder``
    (``OUT/runs/<run_id>/``)."""
    for name in REUSED_RUN_FILES:
        source = match.folder / "runs" / match.record["run_id"] / name
        if source.is_file():
            run_folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, run_folder / name)


__all__ = ["Match", "REUSED_RUN_FILES", "Wanted", "add_run_keys", "copy_run_files", "find_matches", "read_candidates",
           "reuse_folders", "reused_record"]
