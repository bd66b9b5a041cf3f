"""BLEU and chrF go through sacrebleu on the joined words."""

import sacrebleu

from structattn.seq2seq.metrics import corpus_scores
from structattn.seq2seq.vocab import detokenize, target_vocab
from structattn.encoders import ChunkSplitter


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
