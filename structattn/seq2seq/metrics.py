"""Corpus BLEU and chrF through sacrebleu.

Hypotheses and references are the target words joined with single spaces (the synthetic language is
whitespace-joined; the real data are spaCy / UD tokens joined with spaces, lowercased when the vocabulary
lowercases), scored by sacrebleu's ``corpus_bleu`` with its default ``13a`` tokenizer (``force=True``: sacrebleu would
otherwise warn that the text looks tokenised, which it is; 13a leaves space-separated tokens as they are) and ``corpus_chrf``
with its defaults (character 6-grams, beta 2). Both are on a 0-100 scale.
"""

from __future__ import annotations

from typing import Sequence


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
