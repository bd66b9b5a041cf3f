"""Checkpoints: model, optimiser, schedule, loop position, random states, and the operative gin config.

A checkpoint is one ``torch.save`` file of plain values and tensors (loadable with ``weights_only=True``)::

    {"format": "structattn-checkpoint", "version": 2,
     "model": state_dict, "optimizer": ..., "scheduler": ..., "loop": {"step", "epoch", "position", ...},
     "rng": ..., "config": "<operative gin config>", "meta": {...},
     "checksum": {"algorithm": "sha256", "value": "<hex>"}}

``meta`` is what the caller needs to rebuild the model without gin (sizes, plan, task, vocabulary).
``checksum`` is a sha256 over every other part (:func:`payload_digest`: keys, value types, tensor dtypes,
shapes and bytes, in a fixed order), verified on load, so a flipped byte anywhere in the tensors or values
is an error rather than silently different weights. Version-1 files (no checksum) still load.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import torch

FORMAT, VERSION = "structattn-checkpoint", 2
_ZIP_MAGIC, _PICKLE_MAGIC = b"PK\x03\x04", b"\x80"


def _feed(digest: "hashlib._Hash", value: Any) -> None:
    """Add ``value`` to ``digest`` canonically (dict keys sorted by their text)."""
    if isinstance(value, torch.Tensor):
        flat = value.detach().cpu().contiguous().reshape(-1)
        digest.update(f"T{flat.dtype}{tuple(value.shape)}:".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    elif isinstance(value, dict):
        digest.update(f"D{len(value)}:".encode())
        for key in sorted(value, key=lambda k: (type(k).__name__, str(k))):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__[0]}{len(value)}:".encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(f"{type(value).__name__}:{value!r};".encode())


def payload_digest(parts: dict[str, Any]) -> str:
    """sha256 (hex) of a checkpoint's parts, ``checksum`` excluded."""
    digest = hashlib.sha256()
    _feed(digest, {k: v for k, v in parts.items() if k != "checksum"})
    return digest.hexdigest()


def save_checkpoint(path: str | Path, **parts: Any) -> Path:
    """Write ``parts`` (``model``, ``optimizer``, ``scheduler``, ``loop``, ``rng``, ``config``, ``meta``, ...)
    with their checksum, atomically, and return the path: a temporary file in the same folder, flushed to disk
    (so that a crash of the machine right after the rename cannot leave an empty ``last.pt``), then renamed over
    ``path``. A save that fails (a full disk, an interrupt) removes its temporary file and leaves ``path`` as
    it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    payload = {"format": FORMAT, "version": VERSION, **parts}
    payload["checksum"] = {"algorithm": "sha256", "value": payload_digest(payload)}
    try:
        with open(tmp, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _check_kind(path: Path) -> None:
    """Clear errors for the files people pass by mistake: empty files and text files."""
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{str(path)!r} is empty (0 bytes), not a checkpoint")
    with path.open("rb") as f:
        head = f.read(512)
    if head.startswith((_ZIP_MAGIC, _PICKLE_MAGIC)):
        return
    try:
        head.decode("utf-8")
        is_text = b"\x00" not in head
    except UnicodeDecodeError:
        is_text = False
    if is_text:
        raise ValueError(f"{str(path)!r} is a text file, not a structattn checkpoint")


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` and verify its checksum.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is empty, a text file, not a structattn checkpoint (or a newer version), or its
            contents do not match their checksum (a corrupted file).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such checkpoint: {str(path)!r}")
    _check_kind(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a foreign / corrupt file
        raise ValueError(f"{str(path)!r} is not a readable checkpoint: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a structattn checkpoint")
    if data.get("version", 0) > VERSION:
        raise ValueError(f"{str(path)!r} has checkpoint version {data['version']}; this structattn reads up to {VERSION}")
    _verify(path, data)
    return data


def _verify(path: Path, data: dict[str, Any]) -> None:
    stored = data.get("checksum")
    if stored is None:
        if data.get("version", 0) >= 2:
            raise ValueError(f"{str(path)!r} has no checksum (a version-2 checkpoint must); the file is damaged")
        return  # version 1: written before checksums
    actual = payload_digest(data)
    if not isinstance(stored, dict) or stored.get("value") != actual:
        expected = stored.get("value") if isinstance(stored, dict) else stored
        raise ValueError(f"{str(path)!r} is corrupted: its contents hash to sha256 {actual[:16]}..., but the "
                         f"checkpoint records {str(expected)[:16]}...; restore it from a copy or retrain")
