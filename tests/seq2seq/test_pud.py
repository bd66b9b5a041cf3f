"""PUD Czech <-> English pairs: deterministic splits, targets from ``# text_en``, parser UAS against gold."""

import importlib.util

import pytest

from structattn.seq2seq import pud
from structattn.tasks.base import get_task

HAS_CZECH_PARSER = importlib.util.find_spec(pud.CZECH_PARSER) is not None


def test_cs_en_gold_splits_and_targets():
    task = get_task("translation_pud", direction="cs-en")
    splits = task.splits()
    assert {k: len(v) for k, v in splits.items()} == {"train": 800, "dev": 100, "test": 100}
    first = splits["train"][0]
    assert first.id == "n01001011" and first.heads is not None
    assert task.label(first)[:3] == ["“", "While", "much"]
    assert splits["test"][-1].id == pud.czech_sentences()[-1].id
    assert task.baseline([], []) is None


def test_one_tree_joins_parts():
    from structattn.structures import Sentence

    a = Sentence(words=["Hi", "."], heads=[-1, 0], deprels=["ROOT", "punct"])
    b = Sentence(words=["Go", "now"], heads=[-1, 0], deprels=["ROOT", "advmod"])
    joined = pud.one_tree([a, b], "x")
    assert joined.heads == (-1, 0, 0, 2) and joined.deprels[2] == "parataxis"


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="direction"):
        get_task("translation_pud", direction="de-en")
    with pytest.raises(ValueError, match="beem"):
        get_task("translation_pud", beem=3)


@pytest.mark.skipif(not HAS_CZECH_PARSER, reason="cs_core_news_sm is not installed (pip install 'structattn[czech]'; "
                    "CC BY-NC-SA 3.0, never bundled)")
def test_czech_parser_uas_against_gold():
    gold = pud.czech_sentences()[:40]
    parsed = pud.parse_pretokenized(gold)
    score = pud.uas(gold, parsed)
    print(f"cs_core_news_sm UAS on the first 40 PUD sentences: {score:.3f}")
    assert 0.5 < score < 1.0  # a real parser: far above chance, not the gold trees themselves
    assert all(p.words == g.words for p, g in zip(parsed, gold))
    assert pud.uas(gold, gold) == 1.0
