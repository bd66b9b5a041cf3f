"""CoNLL-U -> :class:`Sentence` / :class:`Document` (token lines parsed by the ``conllu`` package).

Conversions: HEAD (1-based, 0 = root) becomes ``heads`` (0-based, -1 = root); DEPS becomes ``edges``
(:class:`SemanticEdge`, head -1 for ``0:root``); a multi-word token ``1-2`` stays one entry of
``Sentence.multiword`` while its syntactic words are the ``words``; ``Entity=`` in MISC (CorefUD 1.0)
becomes ``coref`` (see ``_coref.py``). Empty nodes (``8.1``) are removed and their dependents attached to
their heads (to a word standing in for one whose only head is the root), which makes paths through them one
hop shorter and keeps the graph connected (see ``_enhanced.py``). ``meta`` holds the
comments (``text``, ``text_en``, ...; ``sent_id`` goes to ``id``, ``newdoc id`` to ``doc_id``) and, for
coreference, ``meta["coref_ids"]``: the entity id of each cluster. LEMMA, XPOS, FEATS and the rest of MISC
are not kept.
"""

from __future__ import annotations

from typing import Any

from conllu.exceptions import ParseException
from conllu.parser import DEFAULT_FIELDS, parse_dict_value, parse_id_value, parse_int_value, parse_paired_list_value

from structattn.structures.readers._assemble import COREF_IDS, SentenceAssembler
from structattn.structures.readers._rows import Row, dependency_pairs
from structattn.structures.readers._source import (PathOrText, check_control_characters, numbered_blocks, parse_comment,
                                                   read_source)
from structattn.structures.sentence import Document, Mention, Sentence, describe_sentence

__all__ = ["read_conllu", "read_conllu_documents"]


def read_conllu(path_or_text: PathOrText) -> list[Sentence]:
    """Read every sentence of a CoNLL-U file.

    Args:
        path_or_text: a path (``str`` or ``Path``), or the CoNLL-U text itself (a ``str`` with a newline or tab).

    Returns:
        The sentences in file order; each carries the sentence-level coreference clusters of its mentions.

    Raises:
        ValueError: malformed lines (column count, ids, DEPS, Entity brackets), heads out of range, cycles,
            several roots, or no sentence at all; the message names the file line, the sentence and the token.
            A control character (NUL, ESC, a lone CR, ...; a tab in a comment is fine) names the line, the
            column and the field; a file with CR-only line endings says so.
        FileNotFoundError: when a path does not exist.
    """
    return [sentence for sentence, _ in _read(path_or_text)]


def read_conllu_documents(path_or_text: PathOrText) -> list[Document]:
    """Read a CoNLL-U file as documents (a new one at every ``# newdoc``).

    Sentences before the first ``# newdoc`` form a document with id ``None``. ``Document.coref`` clusters
    the mentions of each entity id over the concatenated words of the document (mentions themselves stay
    inside their sentence, as CorefUD requires); it is ``None`` when no sentence has coreference.
    """
    groups: dict[int, list[Sentence]] = {}
    for sentence, document in _read(path_or_text):
        groups.setdefault(document, []).append(sentence)
    return [Document(group, coref=_document_coref(group), id=group[0].doc_id) for group in groups.values()]


def _read(path_or_text: PathOrText) -> list[tuple[Sentence, int]]:
    text, source = read_source(path_or_text)
    check_control_characters(text, source, DEFAULT_FIELDS)  # a NUL in a FORM is no word
    assembler = SentenceAssembler(source)
    out = []
    for block in numbered_blocks(text):
        comments = [parse_comment(line) for _, line in block if line.startswith("#")]
        sentence = describe_sentence(dict(comments).get("sent_id"))
        rows = [_row(number, line, f"{source} line {number}: {sentence}")
                for number, line in block if not line.startswith("#")]
        out.append((assembler.build(rows, comments, block[0][0]), assembler.document))
    if not out:
        raise ValueError(f"{source}: no sentences (the input is empty or has only blank lines)")
    return out


def _row(number: int, line: str, where: str) -> Row:
    """One token line -> :class:`Row`, fields parsed by ``conllu.parser``'s value parsers.

    Only the columns the library keeps are parsed (LEMMA, XPOS and FEATS are not, and MISC only when it
    holds ``Entity=``); plain numbers take a shortcut past the regular expressions."""
    columns = line.split("\t")
    if len(columns) != len(DEFAULT_FIELDS):
        token_name = f"token ID {columns[0]}" + (f" ({columns[1]!r})" if len(columns) > 1 else "")
        raise ValueError(f"{where}: {token_name}: expected {len(DEFAULT_FIELDS)} tab-separated columns, found "
                         f"{len(columns)}: {line!r}")
    ident, form, _, upos, _, _, head, deprel, deps, misc = columns
    try:
        ident = int(ident) if _is_number(ident) else parse_id_value(ident)
        head = int(head) if _is_number(head) else _field("head", parse_int_value, head)
        deps = None if deps == "_" else _field("deps", parse_paired_list_value, deps)
        entity = (_field("misc", parse_dict_value, misc) or {}).get("Entity") if "Entity=" in misc else None
    except ParseException as error:
        raise ValueError(f"{where}: token ID {columns[0]} ({form!r}): {error}") from error
    if isinstance(deps, str):
        raise ValueError(f"{where}: token ID {columns[0]} ({form!r}): malformed DEPS {deps!r} (expected "
                         "head:label|head:label)")
    if isinstance(ident, int):
        kind, key = "word", (ident,)
    elif ident is None:
        raise ValueError(f"{where}: token ID {columns[0]!r} ({form!r}): 'is not a valid ID'")
    else:  # (1, "-", 2) or (8, ".", 1)
        kind, key = {"-": "range", ".": "empty"}[ident[1]], (ident[0], ident[2])
    return Row(
        kind=kind,
        key=key,
        form=form,
        upos=None if upos == "_" else upos,
        head=head,
        deprel=None if deprel == "_" else deprel,
        deps=dependency_pairs(deps),
        entity=entity,
        line=number,
    )


def _is_number(value: str) -> bool:
    """A plain CoNLL-U number (``0`` or no leading zero), which ``int`` reads as ``conllu`` would."""
    return value.isdigit() and value.isascii() and (value[0] != "0" or value == "0")


def _field(name: str, parse: Any, value: str) -> Any:
    try:
        return parse(value)
    except ParseException as error:
        raise ParseException(f"Failed parsing field '{name}': {error}") from None


def _document_coref(sentences: list[Sentence]) -> list[list[Mention]] | None:
    if all(s.coref is None for s in sentences):
        return None
    clusters: dict[str, list[Mention]] = {}
    offset = 0
    for s in sentences:
        for eid, cluster in zip(s.meta.get(COREF_IDS, []), s.coref or []):
            clusters.setdefault(eid, []).extend(
                m.shifted(offset) for m in cluster
            )
        offset += len(s)
    return list(clusters.values())
