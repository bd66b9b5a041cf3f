"""Structures: annotated text in, pairwise distance / adjacency tensors out."""

from structattn.structures.alignment import align_to_subwords
from structattn.structures.collate import collate
from structattn.structures.generators import GrammarGenerator, ListOpsGenerator
from structattn.structures.interop import from_edge_index, from_networkx, from_pyg, to_edge_index, to_networkx, to_pyg
from structattn.structures.providers import (
    GraphProvider,
    StructureProvider,
    get_provider,
    provider_names,
    register_provider,
)
from structattn.structures.readers import (
    bundled_treebank,
    from_stanza,
    load_bundled,
    read_conllu,
    read_conllu_documents,
    read_sdp,
    write_conllu,
)
from structattn.structures.sentence import Document, Mention, SemanticEdge, Sentence
from structattn.structures.structure import FIELDS, Structure

__all__ = [
    "align_to_subwords",
    "from_edge_index",
    "from_networkx",
    "from_pyg",
    "to_edge_index",
    "to_networkx",
    "to_pyg",
    "FIELDS",
    "Document",
    "GrammarGenerator",
    "GraphProvider",
    "ListOpsGenerator",
    "Mention",
    "SemanticEdge",
    "Sentence",
    "Structure",
    "StructureProvider",
    "collate",
    "get_provider",
    "provider_names",
    "register_provider",
    "bundled_treebank",
    "from_stanza",
    "load_bundled",
    "read_conllu",
    "read_conllu_documents",
    "read_sdp",
    "write_conllu",
]
