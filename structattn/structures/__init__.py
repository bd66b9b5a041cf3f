"""Structures: annotated text in, pairwise distance / adjacency tensors out."""

from structattn.structures.collate import collate
from structattn.structures.providers import (
    GraphProvider,
    StructureProvider,
    get_provider,
    provider_names,
    register_provider,
)
from structattn.structures.sentence import Document, Mention, SemanticEdge, Sentence
from structattn.structures.structure import FIELDS, Structure

__all__ = [
    "FIELDS",
    "Document",
    "GraphProvider",
    "Mention",
    "SemanticEdge",
    "Sentence",
    "Structure",
    "StructureProvider",
    "collate",
    "get_provider",
    "provider_names",
    "register_provider",
]
