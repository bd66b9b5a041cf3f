"""Run records without corpus text: references are dropped when a record is kept, and read again from the corpus.

A translation run's record holds its test hypotheses and, as written by ``compare``, the raw references they
were scored against. Corpora such as Multi30k may not be redistributed, so a record that is kept in a repository
(``structattn keep``, :func:`strip_references`) drops its references and its samples' references, and keeps
instead ``predictions.ref_sha256``: the sha256 of the references, one per line. Whoever reads the record later
(``merge``, the tables, the significance tests, :func:`structattn.experiments.record_checks.read_record`) gets
the references back from the corpus on their own disk (:func:`restore_references`), through the task's
*reference source*; the sha256 proves they are the ones the run was scored against, and the record's BLEU and
chrF are then recomputed from them as for any record.

Reference sources are registered by task name (:func:`register_reference_source`); the built-in one reads
Multi30k (``translation_multi30k``) from ``$STRUCTATTN_MULTI30K`` or the task's ``path=``. Tasks without a
source (synthetic languages, bundled treebanks) keep their references: their text is ours to ship.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from structattn.calls import parse_call

#: ``(task options, split, item ids) -> references``, by task name
ReferenceSource = Callable[[Mapping[str, Any], str, Sequence[str]], list[str]]
_SOURCES: dict[str, ReferenceSource] = {}


def register_reference_source(task: str, source: ReferenceSource) -> None:
    """Let records of task ``task`` be kept without references: ``source(options, split, ids)`` returns them
    again, in the order of ``ids``, from data the reader has."""
    _SOURCES[task] = source


def references_sha256(refs: Sequence[str]) -> str:
    """sha256 of the references, one per line (UTF-8)."""
    return hashlib.sha256("\n".join(refs).encode("utf-8")).hexdigest()


def _task_call(record: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    spec = parse_call(str(record.get("task", "")), "task")
    return spec.name, dict(spec.options)


def has_source(record: Mapping[str, Any]) -> bool:
    """Whether the record's task has a registered reference source (so its references can be dropped)."""
    try:
        name, _ = _task_call(record)
    except ValueError:
        return False
    return name in _SOURCES


def strip_references(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``record`` without corpus text: ``predictions.ref`` replaced by ``predictions.ref_sha256``,
    and the ``ref`` and ``src`` of its ``samples`` dropped (their ids and hypotheses stay). A record whose task
    has no reference source, or that holds no references, is returned unchanged (as a copy).

    Raises:
        ValueError: the task has a source but the references are not a list of strings.
    """
    out = copy.deepcopy(dict(record))
    outputs = out.get("predictions")
    if not has_source(out) or not isinstance(outputs, dict) or "ref" not in outputs:
        return out
    refs = outputs.pop("ref")
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise ValueError(f"run {out.get('run_id')!r}: predictions.ref is not a list of strings")
    outputs["ref_sha256"] = references_sha256(refs)
    out["samples"] = [{k: v for k, v in s.items() if k not in ("ref", "src")} if isinstance(s, dict) else s
                      for s in out.get("samples") or []]
    return out


def without_restored(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as it is to be written: a record kept without references (``ref_sha256``) stays without them
    even after :func:`restore_references` filled them in, so that rewriting it never writes corpus text."""
    outputs = record.get("predictions")
    if isinstance(outputs, dict) and "ref_sha256" in outputs and "ref" in outputs:
        return {**record, "predictions": {k: v for k, v in outputs.items() if k != "ref"}}
    return dict(record)


def restore_references(record: dict[str, Any]) -> str | None:
    """Fill ``record['predictions']['ref']`` back in from the task's reference source, when the record was kept
    without references; ``None`` when done (or nothing to do), else why it cannot be done (the caller raises
    naming the file)."""
    outputs = record.get("predictions")
    if not isinstance(outputs, dict) or "ref_sha256" not in outputs or "ref" in outputs:
        return None
    try:
        name, options = _task_call(record)
    except ValueError as err:
        return f"its references were left out, and its task cannot be read to find them ({err})"
    if name not in _SOURCES:
        return (f"its references were left out, but task {name!r} has no reference source to read them from "
                "(structattn.experiments.references.register_reference_source)")
    ids = outputs.get("ids")
    if not isinstance(ids, list):
        return "its references were left out, and predictions.ids is not a list"
    try:
        refs = _SOURCES[name](options, str(outputs.get("split", "test")), ids)
    except (OSError, ValueError, KeyError) as err:
        return f"its references were left out and could not be read again: {err}"
    if references_sha256(refs) != outputs["ref_sha256"]:
        return (f"its references were left out, and the ones read again for its {len(ids)} items differ from those "
                f"it was scored against (sha256 {references_sha256(refs)[:16]}... vs {str(outputs['ref_sha256'])[:16]}"
                "...): another version of the corpus?")
    outputs["ref"] = refs
    return None


_MULTI30K_ID = re.compile(r"multi30k-(train|dev|test)-([1-9][0-9]*)")


def multi30k_references(options: Mapping[str, Any], split: str, ids: Sequence[str]) -> list[str]:
    """The raw target lines of Multi30k items ``multi30k-<split>-<line>`` (the task's ``tgt``, its ``path`` or
    ``$STRUCTATTN_MULTI30K``).

    Raises:
        FileNotFoundError: no corpus (the message says where to get it and how to point at it).
        ValueError: an id that is not a Multi30k item of ``split``, or a line past the file's end.
    """
    from structattn.tasks.translation_multi30k import SPLIT_FILES, data_folder, read_lines

    folder = data_folder(options.get("path"))
    file = folder / f"{SPLIT_FILES[split]}.{options.get('tgt', 'de')}.gz"
    lines = read_lines(file)
    out = []
    for item in ids:
        match = _MULTI30K_ID.fullmatch(str(item))
        if not match or match.group(1) != split:
            raise ValueError(f"item id {item!r} is not a Multi30k {split} item (multi30k-{split}-<line>)")
        line = int(match.group(2))
        if line > len(lines):
            raise ValueError(f"item {item!r}: {str(file)!r} has only {len(lines)} lines")
        out.append(lines[line - 1])
    return out


register_reference_source("translation_multi30k", multi30k_references)

__all__ = ["ReferenceSource", "has_source", "multi30k_references", "references_sha256", "register_reference_source",
           "restore_references", "strip_references", "without_restored"]
