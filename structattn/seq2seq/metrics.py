"""Corpus BLEU and chrF through sacrebleu.

Hypotheses and references are the target words joined with single spaces (the synthetic language is
whitespace-joined; the real data are spaCy / UD tokens joined with spaces, lowercased when the vocabulary
lowercases), scored by sacrebleu's ``corpus_bleu`` with its default ``13a`` tokenizer (``force=True``: sacrebleu would
otherwise warn that the text looks tokenised, which it is; 13a leaves space-separated tokens as they are) and ``corpus_chrf``
with its defaults (character 6-grams, beta 2). Both are on a 0-100 scale.

Real corpora (Multi30k) are scored the two ways papers report them:

* :func:`sacrebleu_scores`: cased BLEU of *detokenised* hypotheses against the raw reference lines (sacrebleu's
  own ``13a`` tokenisation, Post, 2018) and chrF (Popović, 2015), with sacrebleu's signature strings, so the
  numbers compare across papers; :func:`detokenize_words` turns model words into such text (Moses rules).
* :func:`tokenized_lower_bleu`: BLEU of lowercased, tokenised text (``tokenize="13a", lowercase=True`` on
  tokens joined with spaces): the figure most Multi30k papers print (multi-bleu style).
"""

from __future__ import annotations

import functools
from typing import Any, Sequence, Union

Tokens = Union[str, Sequence[str]]  # a tokenised sentence: tokens joined with spaces, or the list of tokens


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """``{"bleu": ..., "chrf": ...}`` of one reference per hypothesis.

    Raises:
        ValueError: different numbers of hypotheses and references.
    """
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    refs = [list(references)]
    bleu = sacrebleu.corpus_bleu(list(hypotheses), refs, force=True)  # force: the text is tokenised on purpose
    return {"bleu": float(bleu.score),
            "chrf": float(sacrebleu.corpus_chrf(list(hypotheses), refs).score)}


def _check_pairs(hypotheses: Sequence[Any], references: Sequence[Any]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not hypotheses:
        raise ValueError("no hypotheses to score")


def sacrebleu_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """Cased, detokenised corpus BLEU (sacrebleu ``13a``) and chrF of one raw reference per hypothesis.

    Args:
        hypotheses: detokenised system outputs (see :func:`detokenize_words`).
        references: the raw reference lines, untokenised (e.g. ``meta["target_text"]``).

    Returns:
        ``{"bleu", "chrf"}`` (0-100) and ``{"bleu_signature", "chrf_signature"}``, e.g.
        ``"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"``.

    Raises:
        ValueError: different numbers of hypotheses and references, or none.
    """
    from sacrebleu.metrics import BLEU, CHRF

    _check_pairs(hypotheses, references)
    bleu, chrf = BLEU(tokenize="13a"), CHRF()
    refs = [list(references)]
    bleu_score, chrf_score = bleu.corpus_score(list(hypotheses), refs), chrf.corpus_score(list(hypotheses), refs)
    return {"bleu": float(bleu_score.score), "chrf": float(chrf_score.score),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}


def tokenized_lower_bleu(hypotheses: Sequence[Tokens], references: Sequence[Tokens]) -> dict[str, Any]:
    """Lowercased BLEU of tokenised text (sacrebleu ``tokenize="13a", lowercase=True``, ``force=True``).

    Args:
        hypotheses, references: one tokenised sentence each (tokens joined with spaces, or a list of tokens).

    Returns:
        ``{"bleu_tok_lower": score (0-100), "bleu_tok_lower_signature": "nrefs:1|case:lc|...|tok:13a|..."}``.

    Raises:
        ValueError: different numbers of hypotheses and references, or none.
    """
    from sacrebleu.metrics import BLEU

    _check_pairs(hypotheses, references)
    joined = [[_joined(x) for x in hypotheses], [_joined(x) for x in references]]
    bleu = BLEU(tokenize="13a", lowercase=True, force=True)  # force: the text is tokenised on purpose
    score = bleu.corpus_score(joined[0], [joined[1]])
    return {"bleu_tok_lower": float(score.score), "bleu_tok_lower_signature": str(bleu.get_signature())}


def _joined(sentence: Tokens) -> str:
    return sentence if isinstance(sentence, str) else " ".join(sentence)


def detokenize_words(words: Sequence[str], lang: str) -> str:
    """The text of tokenised ``words`` in language ``lang`` (``"de"``, ``"fr"``, ``"cs"``, ``"en"``, ...) by the
    Moses detokeniser rules (``sacremoses``): no space before ``.`` or ``,``, French spacing before ``?``/``!``,
    quotes paired, ... What :func:`sacrebleu_scores` expects of a hypothesis.

    Raises:
        ImportError: ``sacremoses`` is not installed (the message gives the pip command).
    """
    return _moses(lang).detokenize(list(words))


@functools.lru_cache(maxsize=8)
def _moses(lang: str) -> Any:
    try:
        from sacremoses import MosesDetokenizer
    except ImportError as error:
        raise ImportError("detokenising translations needs sacremoses: `pip install sacremoses`") from error
    return MosesDetokenizer(lang=lang)
