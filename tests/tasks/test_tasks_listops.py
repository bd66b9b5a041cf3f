"""The ListOps task: class-balanced splits, lengths as asked, labels equal to the evaluated expression."""

from collections import Counter

import pytest

from structattn.experiments import prepare_data
from structattn.tasks.base import get_task
from structattn.structures.generators import evaluate_listops


@pytest.fixture(scope="module")
def task():
    return get_task("listops", min_length=12, max_length=30, max_depth=3, train=53, dev=20, test=30, seed=2)


def test_every_value_equally_often_in_every_split(task):
    for name, items in task.splits().items():
        counts = Counter(task.label(x) for x in items)
        assert set(counts) == set(range(10)), name
        assert max(counts.values()) - min(counts.values()) <= 1, (name, counts)


def test_labels_are_the_evaluated_expressions_and_lengths_in_range(task):
    for x in task.splits()["test"]:
        assert task.label(x) == evaluate_listops(x.words)
        assert 12 <= len(x) <= 30 and x.heads is not None


def test_majority_baseline_is_about_a_tenth(task):
    data = prepare_data(task, {}, {}, quiet=True)
    assert data.baseline == pytest.approx(0.1)
    assert task.num_labels == 10


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="min_length"):
        get_task("listops", min_length=40, max_length=20)
    with pytest.raises(ValueError, match="split sizes"):
        get_task("listops", test=0)


def test_a_generator_missing_values_fails_naming_them(monkeypatch):
    import structattn.tasks.listops as module

    real = module.ListOpsGenerator

    class OnlyNines(real):
        def example(self, length=None):
            s = super().example(length)
            while s.meta["value"] != 9:
                s = super().example(length)
            return s

    monkeypatch.setattr(module, "ListOpsGenerator", OnlyNines)
    with pytest.raises(ValueError, match=r"could not be balanced; values still missing \{0: 1"):
        get_task("listops", train=1, dev=1, test=1).splits()
