"""The manifest of a compare folder (``comparison.json``) and the run records it declares (``runs/*.json``).

The manifest names the comparison (``fingerprint``), the number of runs, the shard, the ``indices``, ``run_ids``
and ``seeds`` of the runs the folder holds, and the ``reference`` setting the significance tests compare against
(``null``, or absent in folders written before it existed: the default rule of
:func:`structattn.experiments.results.reference_setting`); a record belongs to the folder only when it matches
them (same fingerprint, a declared index with its run id and seed). Anything else in ``runs/`` is a stray,
e.g. a record left by an earlier comparison, and is rejected with its file name. A record that belongs is then
checked for damage (:func:`structattn.experiments.record_checks.check_record`: fields, checksum, per-item
outputs against its metrics) and refused by file name when damaged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from structattn.experiments.record_checks import check_fields, check_record, parse_record
from structattn.experiments.spec import RunSpec


def make_manifest(fingerprint: str, total: int, shard: tuple[int, int] | None,
                  runs: Sequence[RunSpec], reference: str | None = None) -> dict[str, Any]:
    """The ``comparison.json`` of a folder holding ``runs`` (of ``total``) of the comparison ``fingerprint``;
    ``reference``: the setting its tables test the others against (``None``: the default rule)."""
    return {"fingerprint": fingerprint, "runs": total, "shard": list(shard) if shard else None,
            "indices": [r.index for r in runs], "run_ids": [r.run_id for r in runs],
            "seeds": sorted({r.seed for r in runs}), "reference": reference}


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / "comparison.json"
    if not path.is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a compare output directory (no comparison.json)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{str(path)!r} is not valid JSON: {err}") from None


def record_problem(path: Path, record: Any, manifest: dict[str, Any]) -> str | None:
    """Why the record in ``path`` does not belong to the folder of ``manifest`` (``None`` when it does)."""
    if not isinstance(record, dict) or not {"index", "run_id", "seed", "metrics", "fingerprint"} <= set(record):
        return "not a run record of a comparison (needs index, run_id, seed, metrics, fingerprint)"
    declared = dict(zip(manifest.get("indices", []), manifest.get("run_ids") or [None] * len(manifest.get("indices", []))))
    if record["index"] not in declared:
        return f"run index {record['index']} is not one of this folder's runs {sorted(declared)}"
    if declared[record["index"]] is not None and declared[record["index"]] != record["run_id"]:
        return f"run {record['index']} is {declared[record['index']]!r} in comparison.json, not {record['run_id']!r}"
    if path.stem != record["run_id"]:
        return f"the file name does not match its run id {record['run_id']!r}"
    if "seeds" in manifest and record["seed"] not in manifest["seeds"]:
        return f"seed {record['seed']} is not among the declared seeds {manifest['seeds']}"
    if record["fingerprint"] != manifest.get("fingerprint"):
        return f"it belongs to comparison {record['fingerprint']}, not {manifest.get('fingerprint')}"
    return None


def read_records(folder: Path, manifest: dict[str, Any]) -> dict[int, tuple[Path, dict[str, Any]]]:
    """``{index: (file, record)}`` of ``folder/runs/*.json``, every one checked against ``manifest``.

    Raises:
        RecordError: a damaged record (named by its file and field: see
            :mod:`structattn.experiments.record_checks`).
        ValueError: a stray record (named by its file).
    """
    out: dict[int, tuple[Path, dict[str, Any]]] = {}
    for path in sorted((folder / "runs").glob("*.json")):
        record = parse_record(path)
        check_fields(path, record)
        problem = record_problem(path, record, manifest)
        if problem:
            raise ValueError(f"{str(path)!r} does not belong to this comparison: {problem}; remove it, or rerun "
                             "into a fresh folder")
        check_record(path, record)
        if "precision" not in record:  # written before records said it: the folder's operative config does
            record["precision"] = config_precision(folder)
        out[record["index"]] = (path, record)
    return out


def load_records(folder: str | Path) -> list[dict[str, Any]]:
    """The records of the compare folder ``folder`` (``runs/*.json``) in run order, each checked against its
    ``comparison.json`` and for damage (:func:`read_records`): what the table scripts and significance tests
    read, so that none reads a record unchecked.

    Raises:
        FileNotFoundError: ``folder`` has no ``comparison.json``.
        RecordError, ValueError: as :func:`read_records`.
    """
    folder = Path(folder)
    return [record for _, (_, record) in sorted(read_records(folder, read_manifest(folder)).items())]


def config_precision(folder: Path) -> str:
    """The ``training.precision`` bound in ``folder/config.gin`` (the operative config gin wrote), ``'fp32'``
    when it binds none (the default) or the folder has no config."""
    path = folder / "config.gin"
    text = path.read_text() if path.is_file() else ""
    found = re.findall(r"^training\.precision\s*=\s*['\"](\w+)['\"]", text, flags=re.MULTILINE)
    return found[-1] if found else "fp32"


#: the name of a shard folder, ``shard-i-of-N`` (written by :func:`structattn.experiments.shards.shard_folder`)
SHARD_NAME = re.compile(r"shard-(\d+)-of-(\d+)")


def shard_folders(folder: str | Path) -> list[Path]:
    """The compare folders ``folder`` stands for: itself when it holds ``comparison.json``, else its
    ``shard-i-of-N`` subfolders (in shard order). What ``merge``, ``compare --reuse`` and the table scripts read.

    Raises:
        FileNotFoundError: neither (naming the folder).
    """
    folder = Path(folder)
    if (folder / "comparison.json").is_file():
        return [folder]
    found = [(tuple(map(int, m.groups())), p) for p in folder.glob("shard-*-of-*")
             if (m := SHARD_NAME.fullmatch(p.name)) and (p / "comparison.json").is_file()]
    if not found:
        raise FileNotFoundError(f"{str(folder)!r} is not a compare output directory (no comparison.json) and holds "
                                "no shard-i-of-N folders with one")
    return [p for _, p in sorted(found)]
