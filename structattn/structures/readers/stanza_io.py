"""stanza ``Document`` / ``Sentence`` -> :class:`Sentence`, with the conversions of the CoNLL-U reader.

A stanza sentence is turned into the same reader-neutral rows as a CoNLL-U file, so everything the CoNLL-U
reader documents holds here too: heads become 0-based (-1 root), ``deps`` become ``edges`` with empty words
collapsed onto their heads, multi-word tokens go to ``Sentence.multiword``, ``Entity=`` in a word's MISC
becomes ``coref``, comments (``# text`` ...) go to ``meta``. ``id`` is stanza's ``sent_id`` (stanza numbers
sentences that have none); ``doc_id`` comes from ``# newdoc id`` comments as in CoNLL-U. stanza itself is
imported only when this function is called.
"""

from __future__ import annotations

from typing import Any

from conllu.parser import parse_dict_value, parse_paired_list_value

from structattn.structures.readers._assemble import SentenceAssembler
from structattn.structures.readers._rows import Row, dependency_pairs, present
from structattn.structures.readers._source import parse_comment
from structattn.structures.sentence import Sentence

__all__ = ["from_stanza"]

SOURCE = "stanza document"


def from_stanza(doc_or_sentence: Any) -> list[Sentence] | Sentence:
    """Convert a ``stanza.Document`` (-> list of sentences) or one stanza ``Sentence`` (-> one sentence).

    Works on documents from a stanza ``Pipeline`` (tokenize/pos/depparse) and from
    ``stanza.utils.conll.CoNLL.conll2doc``; pass ``ignore_gapping=False`` there to keep empty nodes.

    Raises:
        TypeError: for anything but a stanza Document or Sentence.
        ValueError: invalid annotation (as for :func:`read_conllu`), naming the sentence and the token.
    """
    from stanza.models.common.doc import Document as StanzaDocument
    from stanza.models.common.doc import Sentence as StanzaSentence

    if isinstance(doc_or_sentence, StanzaDocument):
        return _convert(doc_or_sentence.sentences)
    if isinstance(doc_or_sentence, StanzaSentence):
        doc = doc_or_sentence.doc
        if doc is not None and any(s is doc_or_sentence for s in doc.sentences):
            # earlier sentences carry the document's newdoc id and global.Entity
            upto = next(k for k, s in enumerate(doc.sentences) if s is doc_or_sentence)
            return _convert(doc.sentences[: upto + 1])[-1]
        return _convert([doc_or_sentence])[0]
    raise TypeError(f"from_stanza expects a stanza Document or Sentence, got {type(doc_or_sentence).__name__}")


def _convert(sentences: list[Any]) -> list[Sentence]:
    assembler = SentenceAssembler(SOURCE)
    out = []
    for sentence in sentences:
        comments = [parse_comment(c) for c in sentence.comments if c.startswith("#")]
        keys = {key for key, _ in comments}
        if "sent_id" not in keys and sentence.sent_id is not None:
            comments.append(("sent_id", str(sentence.sent_id)))
        if "text" not in keys and sentence.text is not None:
            comments.append(("text", sentence.text))
        try:
            out.append(assembler.build(_rows(sentence), comments, None))
        except ValueError as error:
            if "names empty node" not in str(error):
                raise
            raise ValueError(f"{error} (stanza drops empty nodes unless the CoNLL-U is read with "
                             "CoNLL.conll2doc(..., ignore_gapping=False))") from error
    return out


def _rows(sentence: Any) -> list[Row]:
    """Words, empty words and multi-word tokens in CoNLL-U line order."""
    keyed = [((w.id, 0), _row("word", (w.id,), w)) for w in sentence.words]
    keyed += [(tuple(e.id), _row("empty", tuple(e.id), e)) for e in getattr(sentence, "empty_words", [])]
    keyed += [((t.id[0], -1), Row("range", (t.id[0], t.id[-1]), t.text)) for t in sentence.tokens if len(t.words) > 1]
    return [row for _, row in sorted(keyed, key=lambda kv: kv[0])]


def _row(kind: str, key: tuple[int, ...], word: Any) -> Row:
    deps = parse_paired_list_value(word.deps) if word.deps not in (None, "_") else None
    if isinstance(deps, str):
        raise ValueError(f"{SOURCE}: sentence {word.sent.sent_id!r}: word {word.id} ({word.text!r}) has malformed "
                         f"deps {deps!r}")
    misc = parse_dict_value(word.misc) if word.misc else None
    return Row(
        kind=kind,
        key=key,
        form=word.text,
        upos=present(word.upos),
        head=word.head if kind == "word" else None,
        deprel=present(word.deprel),
        deps=dependency_pairs(deps),
        entity=(misc or {}).get("Entity"),
    )
