"""BLEU and chrF go through sacrebleu: on the joined words, and (real corpora) cased detokenised with signatures
and lowercased tokenised."""

import gzip
from pathlib import Path

import pytest
import sacrebleu

from structattn.encoders import ChunkSplitter
from structattn.seq2seq.metrics import (
    corpus_scores,
    detokenize_words,
    sacrebleu_scores,
    tokenized_lower_bleu,
)
from structattn.seq2seq.vocab import detokenize, target_vocab


def test_known_pair_matches_sacrebleu_directly():
    hyps = ["the cat sat on the mat", "a dog runs fast"]
    refs = ["the cat sat on a mat", "the dog runs fast"]
    scores = corpus_scores(hyps, refs)
    assert abs(scores["bleu"] - sacrebleu.corpus_bleu(hyps, [refs]).score) < 1e-9
    assert abs(scores["chrf"] - sacrebleu.corpus_chrf(hyps, [refs]).score) < 1e-9
    assert 0 < scores["bleu"] < 100


def test_perfect_match_is_100_and_disjoint_is_0():
    refs = ["one two three four five", "six seven eight nine ten"]
    perfect = corpus_scores(refs, refs)
    assert abs(perfect["bleu"] - 100.0) < 1e-9 and abs(perfect["chrf"] - 100.0) < 1e-9
    disjoint = corpus_scores(["qq ww ee rr tt", "yy uu ii oo pp"], refs)
    assert disjoint["bleu"] == 0.0


def test_detokenize_glues_subword_pieces():
    vocab = target_vocab([["translation", "is", "fun"]], splitter=ChunkSplitter(4))
    ids, _ = vocab.encode(["translation", "is", "fun"])
    assert detokenize(ids, vocab) == "translation is fun"
    assert vocab.itos[2:4] == ["<s>", "</s>"]


# --- sacreBLEU scores of real corpora (Multi30k) ----------------------------------------------------------------

HYPS = ["Ein Mann schläft.", "Zwei Hunde spielen im Schnee.", "eine Frau liest ein Buch."]
REFS = ["Ein Mann schläft.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch."]


def test_sacrebleu_scores_are_cased_13a_with_signatures():
    scores = sacrebleu_scores(HYPS, REFS)
    assert abs(scores["bleu"] - sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="13a").score) < 1e-9
    assert abs(scores["chrf"] - sacrebleu.corpus_chrf(HYPS, [REFS]).score) < 1e-9
    assert 0 < scores["bleu"] < 100  # "eine" != "Eine": case counts
    assert sacrebleu_scores(REFS, REFS)["bleu"] == pytest.approx(100.0)
    for part in ("nrefs:1", "case:mixed", "tok:13a", f"version:{sacrebleu.__version__}"):
        assert part in scores["bleu_signature"]
    assert "nc:6" in scores["chrf_signature"] and "case:mixed" in scores["chrf_signature"]


def test_detokenised_bleu_splits_punctuation_itself():
    # 13a cuts "schläft." into "schläft ." on both sides, so a detokenised hypothesis matches a raw reference
    assert sacrebleu_scores(["Ein Mann schläft hier."], ["Ein Mann schläft hier."])["bleu"] == pytest.approx(100.0)
    assert sacrebleu_scores(["Ein Mann schläft hier ."], ["Ein Mann schläft hier."])["bleu"] == pytest.approx(100.0)


def test_tokenized_lower_bleu_lowercases_and_takes_tokens():
    hyps = [h.lower().replace(".", " .").split() for h in HYPS]
    refs = [r.replace(".", " .") for r in REFS]
    scores = tokenized_lower_bleu(hyps, refs)
    assert scores["bleu_tok_lower"] == pytest.approx(100.0)
    assert "case:lc" in scores["bleu_tok_lower_signature"] and "tok:13a" in scores["bleu_tok_lower_signature"]
    joined = [" ".join(h) for h in hyps]
    assert tokenized_lower_bleu(joined, refs) == scores
    worse = tokenized_lower_bleu([["ein", "hund", "."]] + hyps[1:], refs)["bleu_tok_lower"]
    expected = sacrebleu.corpus_bleu(["ein hund ."] + joined[1:], [refs], lowercase=True, force=True).score
    assert worse == pytest.approx(expected) and worse < 100


@pytest.mark.parametrize("score", [sacrebleu_scores, tokenized_lower_bleu])
def test_scores_refuse_mismatched_or_empty_input(score):
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        score(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no hypotheses"):
        score([], [])


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "multi30k_small"


@pytest.mark.parametrize("lang", ["de", "fr", "cs"])
def test_detokenize_words_restores_multi30k_references(lang):
    pytest.importorskip("sacremoses", reason="sacremoses is not installed (pip install sacremoses)")
    from structattn.tasks.translation_multi30k import tokenize

    with gzip.open(FIXTURE / f"train.{lang}.gz", "rt", encoding="utf-8") as handle:
        refs = handle.read().split("\n")[:-1]
    detok = [detokenize_words(words, lang) for words in tokenize(refs, lang)]
    assert sum(d == " ".join(r.split()) for d, r in zip(detok, refs)) >= 0.95 * len(refs)
    assert sacrebleu_scores(detok, refs)["bleu"] > 99.0


def test_detokenize_words_rules():
    pytest.importorskip("sacremoses", reason="sacremoses is not installed (pip install sacremoses)")
    assert detokenize_words(["Ein", "Mann", ",", "der", "„", "schläft", "“", "."], "de") == "Ein Mann, der „schläft“."
    assert detokenize_words(["Un", "T-shirt", "(", "rouge", ")", "!"], "fr") == "Un T-shirt (rouge) !"
