"""The agreement tasks: balanced splits, the verb hidden behind a placeholder, labels from the generator's
agreement record, documents carrying every gold structure."""

from collections import Counter

import pytest

from structattn.experiments import make_providers, prepare_data
from structattn.tasks.base import IGNORE, get_task
from structattn.tasks.agreement import VERB_PLACEHOLDER
from structattn.structures.generators import GrammarGenerator
from structattn.structures.generators.lexicon import other_verb_form


@pytest.fixture(scope="module")
def task():
    return get_task("agreement", attractors=[0, 2, 3], train=48, dev=12, test=24, seed=5)


def test_splits_are_balanced_over_attractors_and_numbers(task):
    for name, items in task.splits().items():
        cells = Counter((x.meta["num_attractors"], task.label(x)) for x in items)
        assert set(cells) == {(a, y) for a in (0, 2, 3) for y in (0, 1)}, name
        assert max(cells.values()) - min(cells.values()) <= 1, (name, cells)


def test_splits_share_no_sentence_and_are_deterministic(task):
    split = task.splits()
    words = {name: {tuple(x.words) for x in items} for name, items in split.items()}
    assert not words["train"] & words["test"] and not words["dev"] & words["test"]
    again = get_task("agreement", attractors=[0, 2, 3], train=48, dev=12, test=24, seed=5).splits()
    assert [x.words for x in again["test"]] == [x.words for x in split["test"]]


def test_the_verb_is_replaced_and_labelled_with_its_number(task):
    for x in task.splits()["train"]:
        verb = x.meta["verb_index"]
        inputs = task.inputs(x)
        assert inputs[verb] == VERB_PLACEHOLDER and inputs.count(VERB_PLACEHOLDER) == 1
        assert [w for i, w in enumerate(inputs) if i != verb] == [w for i, w in enumerate(x.words) if i != verb]
        assert task.label(x) == ("Sing", "Plur").index(x.meta["verb_number"])
        assert "Number=" + x.meta["verb_number"] == x.meta["feats"][verb]
        # no coordinated verb agreeing with the same subject gives the answer away
        assert not any(h == verb and r == "conj" for h, r in zip(x.heads, x.deprels)), x.id


def test_majority_baseline_is_one_half(task):
    data = prepare_data(task, {}, {}, quiet=True)
    assert data.baseline == pytest.approx(0.5)


def test_bad_options_and_foreign_items_are_rejected(task):
    with pytest.raises(ValueError, match="attractors"):
        get_task("agreement", attractors=[-1])
    with pytest.raises(ValueError, match="split sizes"):
        get_task("agreement", train=0)
    plain = GrammarGenerator(0).sentence()
    plain.meta.pop("verb_index")
    with pytest.raises(ValueError, match=repr(plain.id)):
        task.label(plain)


def test_other_verb_form_is_the_wrong_number():
    assert other_verb_form("sings") == "sing" and other_verb_form("sing") == "sings"


@pytest.fixture(scope="module")
def doc_task():
    return get_task("doc_agreement", num_sentences=3, train=6, dev=2, test=3, seed=1)


def test_doc_agreement_labels_every_main_verb_and_nothing_else():
    task = get_task("doc_agreement", num_sentences=3, train=6, dev=2, test=3, seed=1, balance=False)
    for doc in task.splits()["train"]:
        labels, inputs = task.label(doc), task.inputs(doc)
        assert len(labels) == len(inputs) == len(doc.words)
        verbs = [off + s.meta["verb_index"] for s, off in zip(doc.sentences, doc.offsets)]
        assert [i for i, y in enumerate(labels) if y != IGNORE] == verbs
        assert [i for i, w in enumerate(inputs) if w == VERB_PLACEHOLDER] == verbs
        assert [labels[v] for v in verbs] == [("Sing", "Plur").index(s.meta["verb_number"]) for s in doc.sentences]


def test_doc_agreement_splits_are_balanced_by_leaving_surplus_verbs_unscored():
    task = get_task("doc_agreement", num_sentences=4, train=40, dev=10, test=20, seed=3)
    plain = get_task("doc_agreement", num_sentences=4, train=40, dev=10, test=20, seed=3, balance=False)
    for split in ("train", "dev", "test"):
        counts, raw, dropped = Counter(), Counter(), 0
        for doc, same in zip(task.splits()[split], plain.splits()[split]):
            assert doc.words == same.words and task.inputs(doc) == plain.inputs(same)  # same data, same inputs
            labels, full = task.label(doc), plain.label(same)
            counts.update(y for y in labels if y != IGNORE)
            raw.update(y for y in full if y != IGNORE)
            # a scored verb keeps its label; an unscored one is a verb of the surplus number
            assert all(y in (IGNORE, f) for y, f in zip(labels, full))
            dropped += sum(y == IGNORE and f != IGNORE for y, f in zip(labels, full))
        assert counts[0] == counts[1] == min(raw.values()), (split, counts, raw)
        assert dropped == abs(raw[0] - raw[1])
    train = [task.label(d) for d in task.splits()["train"]]
    test = [task.label(d) for d in task.splits()["test"]]
    assert task.baseline(train, test) == pytest.approx(0.5)


def test_doc_agreement_documents_carry_all_three_structures(doc_task):
    names = ["dependency", "semantic", "coreference"]
    data = prepare_data(doc_task, make_providers(names, {}), {}, quiet=True)
    example, doc = data.examples["train"][0], data.items["train"][0]
    for name in names:
        assert example.structures[name].num_tokens == len(doc.words)
    assert doc.coref, "documents re-mention entities, so they have coreference chains"
    assert data.baseline is not None and 0 < data.baseline < 1
