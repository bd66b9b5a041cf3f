"""Checkpoints: model, optimiser, schedule, loop position, random states, and the operative gin config.

A checkpoint is one ``torch.save`` file of plain values and tensors (loadable with ``weights_only=True``)::

    {"format": "structattn-checkpoint", "version": 1,
     "model": state_dict, "optimizer": ..., "scheduler": ..., "loop": {"step", "epoch", "position", ...},
     "rng": ..., "config": "<operative gin config>", "meta": {...}}

``meta`` is what the caller needs to rebuild the model without gin (sizes, plan, task, vocabulary).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

FORMAT, VERSION = "structattn-checkpoint", 1


def save_checkpoint(path: str | Path, **parts: Any) -> Path:
    """Write ``parts`` (``model``, ``optimizer``, ``scheduler``, ``loop``, ``rng``, ``config``, ``meta``, ...)
    atomically (temporary file, then rename) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": FORMAT, "version": VERSION, **parts}, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a structattn checkpoint (or a newer version).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such checkpoint: {str(path)!r}")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a foreign / corrupt file
        raise ValueError(f"{str(path)!r} is not a readable checkpoint: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a structattn checkpoint")
    if data.get("version", 0) > VERSION:
        raise ValueError(f"{str(path)!r} has checkpoint version {data['version']}; this structattn reads up to {VERSION}")
    return data
