"""Run records are evidence: every one is checked when it is read, and written so that a kill never leaves half.

A record (``runs/<run_id>.json`` of a compare folder, ``record.json`` of a train folder, a committed record under
``results/``) carries a ``checksum``: the sha256 of its canonical JSON (sorted keys, no spaces) without that
field, stamped by :func:`write_record_file`. :func:`read_record` refuses, with a :class:`RecordError` naming the
file and the field, a record that

* does not parse (a truncated or half-written file), or is not a JSON object;
* lacks a field the tables need (:data:`REQUIRED`), or has one of the wrong type;
* no longer matches its checksum (edited after it was written);
* holds per-item outputs (``predictions``) that are malformed, cover another number of items than the run's
  split (``provenance.data.items``), or disagree with its metrics: ``test_accuracy`` must equal
  ``sum(correct) / sum(total)`` (to 1e-9), and ``bleu`` / ``chrf`` must equal sacrebleu's corpus scores of the
  hypotheses against the references (to 1e-6) when the record holds the references.

A record kept without its corpus text (``predictions.ref_sha256`` instead of ``predictions.ref``: see
:mod:`structattn.experiments.references`) gets its references back from the corpus when it is read, after its
checksum is checked and before its scores are recomputed; a record that cannot get them back (no corpus, another
version of it) is refused by file name. Writing such a record never writes the references back into it.

Records written before records carried a checksum are still read (their fields and outputs are checked the
same way); one line on stderr per file says that an edit elsewhere in them cannot be detected.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from structattn.experiments.references import restore_references, without_restored

#: fields every run record has, with their JSON types
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "index": int, "run_id": str, "task_label": str, "task": str, "setting": str, "plan": str, "seed": int,
    "metrics": dict}
#: per-item output fields by the record's ``metric`` (besides ``ids``)
ITEM_FIELDS = {"accuracy": ("correct", "total"), "bleu": ("hyp", "ref")}
ACCURACY_TOLERANCE = 1e-9
CORPUS_TOLERANCE = 1e-6

_warned: set[str] = set()


class RecordError(ValueError):
    """A damaged or inconsistent run record; the message names the file and the field."""

    def __init__(self, path: str | Path, field: str, problem: str) -> None:
        self.path, self.field = str(path), field
        super().__init__(f"run record {self.path!r}: {field}: {problem}; the record is refused (rerun that run, e.g. "
                         "with --resume after removing the file, or restore the file from where it was written)")


def data_sha256(record: Mapping[str, Any]) -> str | None:
    """The sha256 of the data a run read (``provenance.data.sha256``), ``None`` when the record has none or its
    kind of run reports something else than a sha256 of the items (64 hex digits), which is not compared."""
    value = ((record.get("provenance") or {}).get("data") or {}).get("sha256")
    return value if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) else None


def record_checksum(record: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``record`` without its ``checksum`` field."""
    body = {k: v for k, v in without_restored(record).items() if k != "checksum"}  # restored references: not hashed
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stamped(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as JSON gives it back, with its ``checksum`` (so the stamp holds for what a reader sees)."""
    plain = json.loads(json.dumps({k: v for k, v in record.items() if k != "checksum"}))
    return {**plain, "checksum": record_checksum(plain)}


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` so that a reader (or a kill) sees the old file or the new one, never half:
    a temporary file in the same folder, flushed to disk, then renamed over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = text.encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def write_record_file(path: str | Path, record: Mapping[str, Any]) -> dict[str, Any]:
    """Stamp ``record`` with its checksum and write it to ``path`` atomically; the stamped record."""
    out = stamped(without_restored(record))
    write_atomic(path, json.dumps(out))
    return out


def parse_record(path: str | Path) -> Any:
    """The JSON in ``path``, unchecked (:func:`read_record` checks it).

    Raises:
        RecordError: the file is not valid JSON (truncated, half-written).
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise RecordError(path, "the file", f"is not valid JSON ({err}; {len(text)} characters: truncated or "
                                            "half-written?)") from None


def read_record(path: str | Path) -> dict[str, Any]:
    """The record in ``path``, checked (see the module docstring).

    Raises:
        RecordError: naming the file and the field that is damaged or inconsistent.
        FileNotFoundError: no such file.
    """
    record = parse_record(path)
    check_record(path, record)
    return record


def check_record(path: str | Path, record: Any) -> None:
    """Raise :class:`RecordError` when ``record`` (read from ``path``) is damaged or inconsistent."""
    check_fields(path, record)
    _check_checksum(path, record)
    problem = restore_references(record)
    if problem:
        raise RecordError(path, "predictions.ref", problem)
    _check_predictions(path, record)


def check_fields(path: str | Path, record: Any) -> None:
    """Raise :class:`RecordError` when ``record`` is not an object with the :data:`REQUIRED` fields."""
    if not isinstance(record, dict):
        raise RecordError(path, "the file", f"holds a JSON {type(record).__name__}, not a run record (an object)")
    for name, kind in REQUIRED.items():
        if name not in record:
            raise RecordError(path, name, f"missing (a run record has {', '.join(REQUIRED)})")
        value = record[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise RecordError(path, name, f"is {value!r}, not a {getattr(kind, '__name__', kind)}")
    for name, value in record["metrics"].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RecordError(path, f"metrics.{name}", f"is {value!r}, not a number")


def _check_checksum(path: str | Path, record: Mapping[str, Any]) -> None:
    stored = record.get("checksum")
    if stored is None:
        if str(path) not in _warned:
            _warned.add(str(path))
            print(f"structattn: warning: run record {str(path)!r} has no checksum (written before records carried "
                  "one): its fields and per-item outputs are checked, an edit elsewhere in it cannot be detected",
                  file=sys.stderr)
        return
    if stored != record_checksum(record):
        raise RecordError(path, "checksum", f"the record no longer matches its checksum {str(stored)[:16]}...: it "
                                            "was changed after it was written")


def _check_predictions(path: str | Path, record: Mapping[str, Any]) -> None:
    outputs = record.get("predictions")
    if not outputs:
        return  # records without per-item outputs: the tables say "no per-item outputs"
    if not isinstance(outputs, dict) or not isinstance(outputs.get("ids"), list):
        raise RecordError(path, "predictions", "per-item outputs need a list of ids")
    metric = record.get("metric", "accuracy")
    n = len(outputs["ids"])
    for name in ITEM_FIELDS.get(metric, ()):
        values = outputs.get(name)
        if not isinstance(values, list) or len(values) != n:
            size = len(values) if isinstance(values, list) else values
            raise RecordError(path, f"predictions.{name}", f"has {size} entries for {n} item ids")
    split = outputs.get("split", "test")
    recorded = ((record.get("provenance") or {}).get("data") or {}).get("items", {}).get(split)
    if isinstance(recorded, int) and recorded != n:
        raise RecordError(path, "predictions.ids", f"holds {n} items, but the run's {split} split has {recorded} "
                                                   f"(provenance.data.items.{split})")
    if metric == "accuracy":
        _check_accuracy(path, record, outputs)
    elif metric == "bleu":
        _check_corpus_scores(path, record, outputs)


def _check_accuracy(path: str | Path, record: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
    correct, total = outputs["correct"], outputs["total"]
    for k, (c, t) in enumerate(zip(correct, total)):
        if not (isinstance(c, int) and isinstance(t, int)) or not 0 <= c <= t:
            raise RecordError(path, "predictions.correct", f"item {k} ({outputs['ids'][k]!r}) has {c!r} right out of "
                                                           f"{t!r} targets")
    stated = record["metrics"].get("test_accuracy")
    if stated is None:
        return
    scored = sum(total)
    accuracy = sum(correct) / scored if scored else 0.0
    if not math.isclose(stated, accuracy, rel_tol=0.0, abs_tol=ACCURACY_TOLERANCE):
        raise RecordError(path, "metrics.test_accuracy", f"says {stated!r}, but its predictions give "
                                                         f"{sum(correct)}/{scored} = {accuracy!r}")


def _check_corpus_scores(path: str | Path, record: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
    hyps, refs = outputs["hyp"], outputs["ref"]
    if not all(isinstance(x, str) for x in (*hyps, *refs)):
        raise RecordError(path, "predictions.hyp", "hypotheses and references must be strings")
    stated = {m: record["metrics"][m] for m in ("bleu", "chrf") if m in record["metrics"]}
    if not stated or not hyps:
        return
    from sacrebleu.metrics import BLEU, CHRF

    scorers = {"bleu": BLEU(tokenize="13a", force=True), "chrf": CHRF()}  # as structattn.seq2seq.metrics scores
    for name, value in stated.items():
        score = float(scorers[name].corpus_score(list(hyps), [list(refs)]).score)
        if not math.isclose(value, score, rel_tol=0.0, abs_tol=CORPUS_TOLERANCE):
            raise RecordError(path, f"metrics.{name}", f"says {value!r}, but sacrebleu gives {score!r} on its "
                                                       "predictions")


__all__ = ["RecordError", "check_fields", "check_record", "data_sha256", "parse_record", "read_record", "record_checksum", "stamped",
           "write_atomic", "write_record_file"]
