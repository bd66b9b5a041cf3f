"""Tokenisation consistency: a structure is only valid for the words it was computed on."""

from __future__ import annotations

from typing import Sequence

from structattn.structures.sentence import Sentence, describe_sentence


def check_alignment(sentence: Sentence, words_model_sees: Sequence[str]) -> None:
    """Raise when the model's words differ from the parser's words (never a silent shift).

    Call it before pairing a parsed sentence with model inputs built from another tokenisation (a
    pretokenised corpus, a word-level vocabulary, the words handed to a subword tokenizer).

    Raises:
        ValueError: naming the sentence, the first differing position and both words, or the two lengths.
    """
    words = list(words_model_sees)
    where = describe_sentence(sentence.id)
    for i, (parsed, seen) in enumerate(zip(sentence.words, words)):
        if parsed != seen:
            raise ValueError(
                f"{where}: token {i} is {parsed!r} for the parser but {seen!r} for the model; the structure "
                f"would be shifted from there on (parser words {len(sentence.words)}, model words {len(words)})"
            )
    if len(words) != len(sentence.words):
        shorter, longer = sorted((sentence.words, words), key=len)
        extra = longer[len(shorter)]
        side = "parser" if longer is sentence.words else "model"
        raise ValueError(
            f"{where}: the parser has {len(sentence.words)} words and the model {len(words)}; "
            f"token {len(shorter)} ({extra!r}) exists only for the {side}"
        )
