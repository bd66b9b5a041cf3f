"""Readers and writers: CoNLL-U (UD, enhanced UD, CorefUD), SDP 2015, stanza documents, bundled data.

Every reader returns :class:`~structattn.structures.Sentence` s with 0-based heads (-1 = root) and raises
``ValueError`` naming the line, the sentence and the token for malformed or invalid input.
"""

from structattn.structures.readers.bundled import bundled_treebank, load_bundled
from structattn.structures.readers.conllu_reader import read_conllu, read_conllu_documents
from structattn.structures.readers.sdp import read_sdp
from structattn.structures.readers.stanza_io import from_stanza
from structattn.structures.readers.writer import write_conllu

__all__ = [
    "bundled_treebank",
    "from_stanza",
    "load_bundled",
    "read_conllu",
    "read_conllu_documents",
    "read_sdp",
    "write_conllu",
]
