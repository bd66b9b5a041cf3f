"""Structures: annotated text in, pairwise distance / adjacency tensors out.

The public names below are imported on first use (module ``__getattr__``, PEP 562), so that importing a
light part of the package (the readers, ``structattn parse``) does not import torch or torch_geometric.
``from structattn.structures import get_provider`` works as usual and registers the built-in providers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from structattn._lazy import lazy_names

_LAZY = {
    "align_to_subwords": "alignment",
    "collate": "collate",
    "GrammarGenerator": "generators",
    "ListOpsGenerator": "generators",
    "from_edge_index": "interop",
    "from_networkx": "interop",
    "from_pyg": "interop",
    "to_edge_index": "interop",
    "to_networkx": "interop",
    "to_pyg": "interop",
    "GraphProvider": "providers",
    "StructureProvider": "providers",
    "get_provider": "providers",
    "provider_names": "providers",
    "register_provider": "providers",
    "PROVIDERS": "providers",
    "bundled_treebank": "readers",
    "from_stanza": "readers",
    "load_bundled": "readers",
    "read_conllu": "readers",
    "read_conllu_documents": "readers",
    "read_sdp": "readers",
    "write_conllu": "readers",
    "Document": "sentence",
    "Mention": "sentence",
    "SemanticEdge": "sentence",
    "Sentence": "sentence",
    "FIELDS": "structure",
    "Structure": "structure",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)


if TYPE_CHECKING:  # static checkers and IDEs see the eager imports
    from structattn.structures.alignment import align_to_subwords
    from structattn.structures.collate import collate
    from structattn.structures.generators import GrammarGenerator, ListOpsGenerator
    from structattn.structures.interop import from_edge_index, from_networkx, from_pyg, to_edge_index, to_networkx, to_pyg
    from structattn.structures.providers import (
        PROVIDERS,
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
