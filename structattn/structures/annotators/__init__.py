"""Annotators: raw text -> parsed :class:`~structattn.structures.Sentence` s (spaCy, stanza).

``structattn parse INPUT.txt --parser spacy|stanza --out OUT.conllu`` runs them from the command line
(:mod:`structattn.structures.annotators.commands`); :mod:`~structattn.structures.annotators.sharding` splits
big inputs over local processes. Parsers themselves are imported only when a model is first used.
"""

from typing import Any

from structattn.structures.annotators.base import ANNOTATORS, Annotator
from structattn.structures.annotators.consistency import check_alignment
from structattn.structures.annotators.spacy_annotator import SpacyAnnotator
from structattn.structures.annotators.stanza_annotator import StanzaAnnotator

def get_annotator(name: str, **options: Any) -> Annotator:
    """Build the annotator registered as ``name`` (``"spacy"`` or ``"stanza"``) with ``options`` (a bad option:
    ``ValueError`` naming it)."""
    return ANNOTATORS.build(name, **options)


__all__ = ["ANNOTATORS", "Annotator", "SpacyAnnotator", "StanzaAnnotator", "check_alignment", "get_annotator"]
