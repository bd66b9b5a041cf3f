"""The treebank shipped with the package: UD Czech PUD (CC BY-SA 3.0, see ``structures/data/README.md``)."""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from structattn.structures.readers.conllu_reader import read_conllu
from structattn.structures.sentence import Sentence

__all__ = ["bundled_treebank", "load_bundled"]

TREEBANK = "cs_pud-gold.conllu"


def bundled_treebank() -> Path:
    """Path of the bundled ``cs_pud-gold.conllu`` (1000 sentences, 18,609 words, gold basic and enhanced UD)."""
    path = Path(str(files("structattn.structures").joinpath("data", TREEBANK)))
    if not path.is_file():
        raise FileNotFoundError(f"bundled treebank missing at {path}; reinstall structattn with its package data")
    return path


@lru_cache(maxsize=1)
def _parsed() -> tuple[Sentence, ...]:
    return tuple(read_conllu(bundled_treebank()))


def load_bundled(limit: int | None = None) -> list[Sentence]:
    """The bundled treebank's sentences, in file order (parsed once per process, then copied).

    Args:
        limit: return only the first ``limit`` sentences (``None``: all 1000).

    Returns:
        Fresh copies, so callers may change them without affecting later calls.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    return [_fresh(s) for s in _parsed()[:limit]]


def _fresh(sentence: Sentence) -> Sentence:
    """A copy whose lists and meta can be changed freely (edges and mentions are frozen, so shared)."""
    out = copy.copy(sentence)
    for name in ("words", "heads", "deprels", "edges", "upos", "multiword"):
        value = getattr(sentence, name)
        if value is not None:
            setattr(out, name, list(value))
    out.coref = None if sentence.coref is None else [list(cluster) for cluster in sentence.coref]
    out.meta = {k: list(v) if isinstance(v, list) else v for k, v in sentence.meta.items()}
    return out
