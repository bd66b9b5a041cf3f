"""The translation tasks: deterministic splits, growing train sets, corrupted trees, recorded options."""

import pytest

from structattn.tasks.base import get_task

SMALL = dict(dev=5, test=5, grammar_depth=1, max_words=10)


def test_splits_are_deterministic_and_train_grows_by_extension():
    small = get_task("translation_synthetic", train=20, **SMALL).splits()
    large = get_task("translation_synthetic", train=50, **SMALL).splits()
    assert [s.words for s in large["train"][:20]] == [s.words for s in small["train"]]
    assert [s.meta["target"] for s in large["test"]] == [s.meta["target"] for s in small["test"]]
    train_words = {tuple(s.words) for s in large["train"]}
    assert all(len(s) <= 10 for s in large["train"])
    assert {s.id for s in large["train"]}.isdisjoint({s.id for s in large["test"]})
    assert train_words  # a grammar this small may repeat sentences across splits; ids still differ


def test_corrupt_option_changes_the_source_trees_not_the_targets():
    gold = get_task("translation_synthetic", train=40, **SMALL).splits()
    noisy = get_task("translation_synthetic", train=40, corrupt=0.2, **SMALL).splits()
    for split in gold:
        total = sum(len(s) - 1 for s in gold[split])
        changed = sum(a != b for g, n in zip(gold[split], noisy[split]) for a, b in zip(g.heads, n.heads))
        assert changed == round(0.2 * total)
        assert [s.meta["target"] for s in noisy[split]] == [s.meta["target"] for s in gold[split]]


def test_options_name_the_task_and_seq2seq_settings():
    task = get_task("translation_synthetic", train=10, beam=3, corrupt=0.1, **SMALL)
    options = task.options()
    assert options["beam"] == 3 and options["corrupt"] == 0.1 and "length_penalty" not in options
    assert task.seq2seq.beam == 3
    with pytest.raises(ValueError, match="corrupt"):
        get_task("translation_synthetic", corrupt=1.5)
