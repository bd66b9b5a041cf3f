"""Sentences -> CoNLL-U text (token lines serialised by the ``conllu`` package).

What is written: FORM, UPOS, HEAD (1-based, 0 = root), DEPREL, DEPS (from ``edges``, sorted by head),
``Entity=`` in MISC (from ``coref``, CorefUD 1.0), multi-word token ranges, ``# newdoc id`` whenever
``doc_id`` changes, ``# sent_id`` and the comments in ``meta`` (entries whose value is a string or
``None``; ``meta["coref_ids"]`` supplies the entity ids). Columns the Sentence does not carry are ``_``.

Round trip: ``read_conllu(write_conllu(sentences)) == sentences`` for sentences read from CoNLL-U: the
reader's form is the fixed point (empty nodes already collapsed, edges and mentions in canonical order,
a discontinuous mention already its covering span). Sentences built in Python come back equal up to that
canonical order and, if they have coreference but no ``global.Entity`` comment, with that comment added.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from conllu.models import Token, TokenList

from structattn.structures.readers._assemble import COREF_IDS
from structattn.structures.readers._coref import DEFAULT_FIELDS, FORBIDDEN_IN_ID
from structattn.structures.sentence import Mention, Sentence, describe_sentence

__all__ = ["write_conllu"]

_FIRST = object()  # "no previous sentence" marker for doc_id changes


def write_conllu(sentences: Iterable[Sentence], path: str | Path | None = None) -> str:
    """Write ``sentences`` as CoNLL-U.

    Args:
        sentences: the sentences, in order.
        path: file to write (UTF-8); ``None`` only returns the text.

    Returns:
        The CoNLL-U text.

    Raises:
        ValueError: a value that CoNLL-U cannot hold (tab or newline in a field, an entity id with
            ``-=| ()``, two mentions of one entity that cross), naming the sentence and the token.
    """
    blocks, previous_doc, fields = [], _FIRST, None
    for index, sentence in enumerate(sentences):
        comments = []
        if sentence.doc_id != previous_doc or "newdoc" in sentence.meta:
            fields = None
            if sentence.doc_id is not None:
                comments.append(("newdoc id", sentence.doc_id))
        previous_doc = sentence.doc_id
        if "global.Entity" in sentence.meta:
            fields = tuple((sentence.meta["global.Entity"] or "").split("-"))
        elif sentence.coref is not None and fields is None:
            fields = DEFAULT_FIELDS
            comments.append(("global.Entity", "-".join(DEFAULT_FIELDS)))
        if sentence.id is not None:
            comments.append(("sent_id", sentence.id))
        comments += [(k, v) for k, v in sentence.meta.items()
                     if (v is None or isinstance(v, str)) and k not in ("sent_id", "newdoc id")]
        misc = _entity_misc(sentence, index, fields or DEFAULT_FIELDS)
        blocks.append(_comment_lines(comments) + _tokens(sentence, misc).serialize())
    text = "".join(blocks)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _comment_lines(comments: list[tuple[str, str | None]]) -> str:
    return "".join(f"# {key}\n" if value is None else f"# {key} = {value}\n" for key, value in comments)


def _tokens(s: Sentence, misc: list[str | None]) -> TokenList:
    ranges = {first: (last, surface) for first, last, surface in s.multiword}
    deps: list[list[tuple[str, int]]] = [[] for _ in s.words]
    for e in sorted(s.edges or [], key=lambda e: (e.head, e.label)):
        deps[e.dependent].append((e.label, e.head + 1))
    tokens = []
    for i, word in enumerate(s.words):
        if i in ranges:
            last, surface = ranges[i]
            tokens.append(_token(s, i, (i + 1, "-", last + 1), surface))
        tokens.append(_token(s, i, i + 1, word, upos=None if s.upos is None else s.upos[i],
                             head=None if s.heads is None else s.heads[i] + 1,
                             deprel=None if s.deprels is None else s.deprels[i],
                             deps=deps[i] or None, misc=None if misc[i] is None else {"Entity": misc[i]}))
    return TokenList(tokens)


def _token(s: Sentence, i: int, ident, form: str, upos=None, head=None, deprel=None, deps=None, misc=None) -> Token:
    for value in [form, upos, deprel] + [label for label, _ in deps or []]:
        if value is not None and ("\t" in value or "\n" in value or value == ""):
            raise ValueError(f"{describe_sentence(s.id)}: token {i} ({s.words[i]!r}): {value!r} cannot be written to "
                             "CoNLL-U (empty, or holds a tab or newline)")
    return Token(id=ident, form=form, lemma=None, upos=upos, xpos=None, feats=None, head=head,
                 deprel=deprel, deps=deps, misc=misc)


def _entity_misc(s: Sentence, index: int, fields: tuple[str, ...]) -> list[str | None]:
    """The ``Entity`` MISC value of each word: closing brackets, then openings (longer first), then singles."""
    if not s.coref:
        return [None] * len(s)
    ids = s.meta.get(COREF_IDS)
    if not isinstance(ids, list) or len(ids) != len(s.coref):
        ids = [f"s{index}e{k}" for k in range(len(s.coref))]
    closing, opening, single = ([[] for _ in s.words] for _ in range(3))
    for eid, cluster in zip(ids, s.coref):
        _check_cluster(s, str(eid), cluster)
        for m in cluster:
            values = [str(eid) if f == "eid" else str(m.head - m.start + 1) if f == "head" and m.head is not None
                      else "" for f in fields]
            chunk = "(" + "-".join(values).rstrip("-")
            if m.end - m.start == 1:
                single[m.start].append(chunk + ")")
            else:
                opening[m.start].append((m.start - m.end, chunk))
                closing[m.end - 1].append((-m.start, f"{eid})"))
    return ["".join(c for _, c in sorted(closing[i], key=lambda x: x[0]))
            + "".join(c for _, c in sorted(opening[i], key=lambda x: x[0]))
            + "".join(single[i]) or None for i in range(len(s))]


def _check_cluster(s: Sentence, eid: str, cluster: list[Mention]) -> None:
    if not eid or any(c in eid for c in FORBIDDEN_IN_ID):
        raise ValueError(f"{describe_sentence(s.id)}: entity id {eid!r} cannot be written to CoNLL-U (empty or holds one of "
                         f"{FORBIDDEN_IN_ID!r})")
    for a in cluster:
        for b in cluster:
            if a.start < b.start < a.end < b.end:
                raise ValueError(f"{describe_sentence(s.id)}: mentions [{a.start}, {a.end}) and [{b.start}, {b.end}) of entity "
                                 f"{eid!r} cross at token {b.start} ({s.words[b.start]!r}); CorefUD cannot write that")
