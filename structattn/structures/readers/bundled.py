"""The treebanks shipped with the package (CC BY-SA 3.0, see ``structures/data/README.md``).

``"cs_pud"`` (the default) is UD Czech PUD; ``"en_pud"`` is UD English PUD: the same 1000 sentences (news and
Wikipedia, ids ``n01001011`` ...), in English, with gold basic and enhanced dependencies.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from structattn.structures.readers.conllu_reader import read_conllu
from structattn.structures.sentence import Sentence

__all__ = ["BUNDLED", "bundled_treebank", "load_bundled"]

#: Bundled treebank name -> file under ``structattn/structures/data``.
BUNDLED = {"cs_pud": "cs_pud-gold.conllu", "en_pud": "en_pud-ud-test.conllu"}
#: The Czech file (kept for callers that read the name).
TREEBANK = BUNDLED["cs_pud"]


def bundled_treebank(treebank: str = "cs_pud") -> Path:
    """Path of a bundled treebank file.

    Args:
        treebank: ``"cs_pud"`` (``cs_pud-gold.conllu``: 1000 sentences, 18,609 words, gold basic and enhanced UD)
            or ``"en_pud"`` (``en_pud-ud-test.conllu``: 1000 sentences, 21,180 words, gold basic and enhanced UD).

    Raises:
        ValueError: an unknown name (the known ones are listed).
        FileNotFoundError: the package was installed without its data.
    """
    if treebank not in BUNDLED:
        raise ValueError(f"unknown bundled treebank {treebank!r}; known: {sorted(BUNDLED)}")
    path = Path(str(files("structattn.structures").joinpath("data", BUNDLED[treebank])))
    if not path.is_file():
        raise FileNotFoundError(f"bundled treebank missing at {path}; reinstall structattn with its package data")
    return path


@lru_cache(maxsize=None)
def _parsed(treebank: str) -> tuple[Sentence, ...]:
    return tuple(read_conllu(bundled_treebank(treebank)))


def load_bundled(limit: int | None = None, treebank: str = "cs_pud") -> list[Sentence]:
    """A bundled treebank's sentences, in file order (parsed once per process, then copied).

    Args:
        limit: return only the first ``limit`` sentences (``None``: all 1000).
        treebank: ``"cs_pud"`` (default) or ``"en_pud"`` (see :func:`bundled_treebank`).

    Returns:
        Fresh copies, so callers may change them without affecting later calls.

    Raises:
        ValueError: a negative ``limit`` or an unknown treebank.
        TypeError: a treebank name passed as ``limit`` (write ``load_bundled(treebank="en_pud")``).
    """
    if isinstance(limit, str):
        raise TypeError(f"load_bundled's first argument is limit; write load_bundled(treebank={limit!r})")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    return [_fresh(s) for s in _parsed(treebank)[:limit]]


def _fresh(sentence: Sentence) -> Sentence:
    """A copy whose meta can be changed freely (the per-word tuples are immutable, so shared)."""
    out = copy.copy(sentence)
    out.meta = {k: list(v) if isinstance(v, list) else v for k, v in sentence.meta.items()}
    return out
