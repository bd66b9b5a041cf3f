"""SSAN probing datasets: labels recomputed independently, balance, seeds, valid trees, bundled and literal data."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from structattn.tasks.constituents import constituency_depth, top_constituents
from structattn.tasks.ssan_data import (
    CORE_RELATIONS,
    DEPENDENCY_DEPTH_BINS,
    OTHER,
    bigram_shift_examples,
    depth_class,
    majority_baseline,
    max_depths,
    quantile_bins,
    reorder_token_labels,
    top_constituent_examples,
    top_sequence,
    tree_depth_examples,
    word_reordering_examples,
)
from structattn.structures import Sentence
from structattn.structures.generators import GrammarGenerator
from structattn.structures.readers.bundled import load_bundled
from structattn.structures.sentence import validate_tree


def hand_written() -> list[Sentence]:
    return [
        Sentence(
            ["the", "dog", "chased", "a", "cat", "."], heads=[1, 2, -1, 4, 2, 2],
            deprels=["det", "nsubj", "root", "det", "obj", "punct"],
            upos=["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
            edges=[(1, 0, "det"), (2, 1, "nsubj"), (-1, 2, "root"), (4, 3, "det"), (2, 4, "obj"), (2, 5, "punct")],
            coref=[[(0, 2), (3, 5)]],
            constituency="(ROOT (S (NP (DT the) (NN dog)) (VP (VBD chased) (NP (DT a) (NN cat))) (. .)))",
            meta={"xpos": ["DT", "NN", "VBD", "DT", "NN", "."], "text": "the dog chased a cat."}, id="h1",
        ),
        Sentence(["dogs", "bark"], heads=[1, -1], deprels=["nsubj", "root"], upos=["NOUN", "VERB"],
                 constituency="(S (NP (NNS dogs)) (VP (VBP bark)))", id="h2"),
        Sentence(["la", "la", "la"], heads=[-1, 0, 0], deprels=["root", "dep", "dep"], upos=["X"] * 3,
                 constituency="(S (X la) (X la) (X la))", id="h3"),
        Sentence(["ja", "ja", "nie", "ja"], heads=[2, 2, -1, 2], deprels=["obl:tmod", "advmod", "root", "obj"],
                 upos=["PRON", "ADV", "PART", "PRON"], constituency="(S (NP (PRP ja)) (ADVP (RB ja)) (VP (VB nie) (NP (PRP ja))))",
                 id="h4"),
    ]


@pytest.fixture(scope="module")
def bundled() -> list[Sentence]:
    return load_bundled()


def by_id(sentences: list[Sentence]) -> dict[str, Sentence]:
    return {s.id: s for s in sentences}


def labelled_arcs(s: Sentence) -> Counter:
    """Tree as a multiset of (word, head word, relation): invariant when the annotation follows the words."""
    return Counter((w, None if h < 0 else s.words[h], r) for w, h, r in zip(s.words, s.heads, s.deprels))


def semantic_arcs(s: Sentence) -> Counter:
    return Counter((None if e.head < 0 else s.words[e.head], s.words[e.dependent], e.label) for e in s.edges)


def check_word_order_example(example, source: Sentence) -> None:
    new = example.sentence
    validate_tree(new.heads, new.id)
    graph = nx.empty_graph(len(new))
    graph.add_edges_from((i, h) for i, h in enumerate(new.heads) if h >= 0)
    assert nx.is_tree(graph)
    assert sorted(new.words) == sorted(source.words) and labelled_arcs(new) == labelled_arcs(source)
    if source.edges is not None:
        assert semantic_arcs(new) == semantic_arcs(source)
    assert new.constituency is None and new.coref is None and new.multiword == ()
    assert "text" not in new.meta and new.meta["source_id"] == source.id and new.meta["label"] == example.label


# -- bigram shift --------------------------------------------------------------------------------------------
def check_bigram_label(example, source: Sentence) -> None:
    new, old = example.sentence.words, source.words
    diff = [i for i in range(len(old)) if new[i] != old[i]]
    if example.label == 0:
        assert diff == []
    else:
        assert len(diff) == 2 and diff[1] == diff[0] + 1
        assert (new[diff[0]], new[diff[1]]) == (old[diff[1]], old[diff[0]])
        assert example.sentence.meta["swapped"] == diff[0]
    check_word_order_example(example, source)


def test_bigram_shift_on_hand_written_sentences():
    sentences = hand_written()
    examples = bigram_shift_examples(sentences, seed=3)
    assert [e.sentence.meta["source_id"] for e in examples] == ["h1", "h2", "h4"]  # "la la la" cannot change
    for e in examples:
        check_bigram_label(e, by_id(sentences)[e.sentence.meta["source_id"]])
    assert sorted(Counter(e.label for e in examples).values()) == [1, 2]
    tags = dict(zip(sentences[0].words, sentences[0].meta["xpos"]))
    shifted = [
        e for seed in range(8) for e in bigram_shift_examples(sentences, seed)
        if e.label == 1 and e.sentence.meta["source_id"] == "h1"
    ]
    assert shifted
    for e in shifted:  # per-token meta follows the words
        assert e.sentence.meta["xpos"] == [tags[w] for w in e.sentence.words]


def test_bigram_shift_on_the_bundled_treebank(bundled):
    examples = bigram_shift_examples(bundled, seed=0)
    counts = Counter(e.label for e in examples)
    assert len(examples) == len(bundled) and abs(counts[0] - counts[1]) <= 1
    sources = by_id(bundled)
    for e in examples:
        check_bigram_label(e, sources[e.sentence.meta["source_id"]])
    assert majority_baseline([e.label for e in examples]) == pytest.approx(0.5, abs=1e-3)


def test_bigram_shift_is_deterministic_per_seed(bundled):
    def signature(seed):
        return [(e.label, e.sentence.words, e.sentence.heads) for e in bigram_shift_examples(bundled[:200], seed)]

    assert signature(1) == signature(1)
    assert signature(1) != signature(2)


# -- word reordering -----------------------------------------------------------------------------------------
def check_reordering_label(example, source: Sentence) -> None:
    inserted, origin = example.label
    new, old = example.sentence.words, source.words
    assert inserted != origin and new != old and new[inserted] == old[origin]
    assert new[:inserted] + new[inserted + 1:] == old[:origin] + old[origin + 1:]
    check_word_order_example(example, source)


def test_word_reordering_labels(bundled):
    sentences = hand_written() + bundled[:300]
    examples = word_reordering_examples(sentences, seed=5)
    sources = by_id(sentences)
    assert "h3" not in {e.sentence.meta["source_id"] for e in examples}  # no move changes "la la la"
    assert len(examples) == len(sentences) - 1
    for e in examples:
        check_reordering_label(e, sources[e.sentence.meta["source_id"]])
    same = [(e.label, e.sentence.words) for e in word_reordering_examples(sentences, seed=5)]
    assert same == [(e.label, e.sentence.words) for e in examples]
    assert same != [(e.label, e.sentence.words) for e in word_reordering_examples(sentences, seed=6)]
    # both directions and both ends occur
    assert any(i > o for i, o in (e.label for e in examples)) and any(i < o for i, o in (e.label for e in examples))
    # the control word: another index, roughly uniform over the words left in place
    for e in examples:
        untouched = e.sentence.meta["untouched"]
        if len(e.sentence) == 2:
            assert untouched is None
        else:
            assert untouched not in e.label and 0 <= untouched < len(e.sentence)
    long = [e for e in examples if len(e.sentence) >= 10]
    relative = Counter(min(4, 5 * e.sentence.meta["untouched"] // len(e.sentence)) for e in long)
    assert len(relative) == 5 and min(relative.values()) > len(long) / 10, relative


def test_word_reordering_skips_only_no_op_moves():
    s = Sentence(["a", "a", "b"], heads=[-1, 0, 0], id="aab")
    labels = Counter(e.label for seed in range(200) for e in word_reordering_examples([s], seed))
    # moving word 0 to 1 (or 1 to 0) leaves "a a b": the 4 other distinct moves remain
    assert set(labels) == {(2, 0), (2, 1), (0, 2), (1, 2)}
    assert reorder_token_labels(5, (3, 1)) == [0, 2, 0, 1, 0]
    # balanced tagging: the inserted word, the origin and one control word; the rest is ignored
    assert reorder_token_labels(5, (3, 1), untouched=4) == [-100, 2, -100, 1, 0]
    with pytest.raises(ValueError, match="untouched index 1 is one of the moved positions"):
        reorder_token_labels(5, (3, 1), untouched=1)
    two = word_reordering_examples([Sentence(["a", "b"], heads=[-1, 0], id="ab")], seed=0)
    assert [e.sentence.meta["untouched"] for e in two] == [None]


# -- tree depth ----------------------------------------------------------------------------------------------
def networkx_max_depth(s: Sentence) -> int:
    graph = nx.Graph([(i, h) for i, h in enumerate(s.heads) if h >= 0])
    graph.add_nodes_from(range(len(s)))
    return max(nx.single_source_shortest_path_length(graph, s.heads.index(-1)).values())


def test_tree_depth_on_the_bundled_treebank(bundled):
    depths = [networkx_max_depth(s) for s in bundled]
    assert max_depths(bundled, "dependency") == depths
    # the documented default bins are the quartiles of the bundled treebank, and roughly balanced there
    assert quantile_bins(depths, 4) == DEPENDENCY_DEPTH_BINS
    shares = Counter(depth_class(d, DEPENDENCY_DEPTH_BINS) for d in depths)
    assert sorted(shares) == [0, 1, 2, 3] and all(0.18 < v / len(bundled) < 0.32 for v in shares.values()), shares
    examples = tree_depth_examples(bundled, seed=0)
    counts = Counter(e.label for e in examples)
    assert len(counts) == 4 and len(set(counts.values())) == 1 and counts[0] == min(shares.values())
    sources = by_id(bundled)
    for e in examples:
        source = sources[e.sentence.meta["source_id"]]
        expected = sum(networkx_max_depth(source) > t for t in (3, 4, 5))
        assert e.label == expected and e.sentence.words == source.words and e.sentence.heads == source.heads
    assert [e.sentence.id for e in tree_depth_examples(bundled, seed=0)] == [e.sentence.id for e in examples]
    assert [e.sentence.id for e in tree_depth_examples(bundled, seed=1)] != [e.sentence.id for e in examples]
    assert len(tree_depth_examples(bundled, balance=False)) == len(bundled)


def test_tree_depth_literal_and_constituency():
    sentences = hand_written()
    assert max_depths(sentences, "dependency") == [2, 1, 1, 1]
    # (ROOT (S (VP (NP (DT a) ...)))): ROOT-S-VP-NP-DT-a = 5 edges
    assert constituency_depth(sentences[0]) == 5 and constituency_depth(sentences[1]) == 3
    examples = tree_depth_examples(sentences, bins=(1,), source="dependency", balance=False)
    assert [e.label for e in examples] == [1, 0, 0, 0]
    auto = tree_depth_examples(sentences, bins=(3, 4), balance=False)  # all have brackets: constituency
    assert [e.label for e in auto] == [2, 0, 0, 1]  # depths 5, 3, 2, 4
    with pytest.raises(ValueError, match="cannot balance"):
        tree_depth_examples(sentences, bins=(1, 9), source="dependency")


def test_tree_depth_on_generated_sentences():
    generator = GrammarGenerator(seed=7)
    sentences = [generator.sentence() for _ in range(60)]
    examples = tree_depth_examples(sentences, seed=0)  # constituency depth, quartile bins
    counts = Counter(e.label for e in examples)
    assert len(counts) >= 3 and len(set(counts.values())) == 1
    for e in examples:
        validate_tree(e.sentence.heads, e.sentence.id)


# -- top constituents ----------------------------------------------------------------------------------------
def test_top_sequences_literal():
    s = hand_written()
    assert top_constituents(s[0]) == ("NP", "VP", ".")  # unary ROOT -> S descended
    assert top_constituents(s[1]) == ("NP", "VP")
    assert top_sequence(s[0], "dependency") == ("nsubj", "ROOT", "obj", "punct")
    assert top_sequence(s[3], "dependency") == ("obl", "advmod", "ROOT", "obj")  # subtype stripped


def test_top_constituent_classes_and_other():
    s = hand_written()
    sentences = [s[0], s[0], s[0], s[1], s[1], s[2], s[3]]
    examples = top_constituent_examples(sentences, num_classes=3, source="dependency")
    assert [e.label for e in examples] == ["nsubj ROOT obj punct"] * 3 + ["nsubj ROOT"] * 2 + [OTHER, OTHER]
    assert majority_baseline([e.label for e in examples]) == pytest.approx(3 / 7)
    reused = top_constituent_examples([s[2], s[1]], classes=["ROOT dep dep"], source="dependency")
    assert [e.label for e in reused] == ["ROOT dep dep", OTHER]
    auto = top_constituent_examples(sentences, num_classes=3)
    assert [e.label for e in auto][:3] == ["NP VP ."] * 3 and auto[0].sentence.constituency is not None
    capped = top_constituent_examples(sentences, seed=4, num_classes=3, source="dependency", max_per_class=1)
    assert sorted(e.label for e in capped) == sorted(["nsubj ROOT obj punct", "nsubj ROOT", OTHER])


def test_top_constituents_on_the_bundled_treebank(bundled):
    examples = top_constituent_examples(bundled)
    labels = [e.label for e in examples]
    assert len(set(labels)) == 20
    sources = by_id(bundled)
    for e in examples[:200]:
        source = sources[e.sentence.meta["source_id"]]
        root = source.heads.index(-1)
        expected = " ".join(
            "ROOT" if i == root else r.split(":")[0] for i, r in enumerate(source.deprels) if i == root or source.heads[i] == root
        )
        assert e.sentence.meta["sequence"] == expected
        assert e.label in (expected, OTHER)
    named = Counter(label for label in labels if label != OTHER)
    assert min(named.values()) >= max(Counter(e.sentence.meta["sequence"] for e in examples if e.label == OTHER).values())


def test_core_relation_sequences_and_balance(bundled):
    s = hand_written()
    assert top_sequence(s[0], "dependency", CORE_RELATIONS) == ("nsubj", "ROOT", "obj")  # punct dropped
    assert top_sequence(s[3], "dependency", CORE_RELATIONS) == ("ROOT", "obj")  # obl, advmod dropped
    assert top_sequence(s[0], "constituency", CORE_RELATIONS) == ("NP", "VP", ".")  # constituency: no filter
    examples = top_constituent_examples(bundled, seed=2, num_classes=5, source="dependency",
                                        relations=CORE_RELATIONS, balance=True)
    counts = Counter(e.label for e in examples)
    # recount the classes independently: the four most frequent core sequences, everything else OTHER
    sequences = []
    for source in bundled:
        root = source.heads.index(-1)
        sequences.append(" ".join(
            "ROOT" if i == root else r.split(":")[0] for i, r in enumerate(source.deprels)
            if i == root or (source.heads[i] == root and r.split(":")[0] in {"nsubj", "obj", "iobj", "csubj", "ccomp"})
        ))
    full = Counter(sequences)
    top4 = [q for q, _ in full.most_common(4)]
    expected_sizes = [full[q] for q in top4] + [len(bundled) - sum(full[q] for q in top4)]
    assert sorted(counts) == sorted([*top4, OTHER])
    assert set(counts.values()) == {min(expected_sizes)}
    assert majority_baseline([e.label for e in examples]) == pytest.approx(0.2)
    assert [e.sentence.id for e in examples] != [
        e.sentence.id for e in top_constituent_examples(bundled, seed=3, num_classes=5, source="dependency",
                                                        relations=CORE_RELATIONS, balance=True)
    ]
    capped = top_constituent_examples(bundled, num_classes=5, source="dependency", relations=CORE_RELATIONS,
                                      balance=True, max_per_class=7)
    assert set(Counter(e.label for e in capped).values()) == {7}
    with pytest.raises(ValueError, match=r"cannot balance top-constituent classes: no example of \['never'\]"):
        top_constituent_examples(bundled[:50], classes=["never"], source="dependency", balance=True)


# -- shared ----------------------------------------------------------------------------------------------------
def test_majority_baseline_and_errors():
    assert majority_baseline([1, 1, 0]) == pytest.approx(2 / 3)
    assert majority_baseline([(1, 2), (1, 2), (0, 1), "x"]) == 0.5
    with pytest.raises(ValueError, match="no labels"):
        majority_baseline([])
    with pytest.raises(ValueError, match="source must be"):
        tree_depth_examples(hand_written(), source="amr")
    bad = Sentence(["a", "b"], heads=[-1, 0], constituency="(S (X a) (X c))", id="bad")
    with pytest.raises(ValueError, match="'bad': constituency tree has"):
        top_constituents(bad)
    with pytest.raises(ValueError, match="'nodeps' needs heads and deprels"):
        top_sequence(Sentence(["a"], heads=[-1], id="nodeps"), "dependency")


# -- Task wrappers ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, output, num_labels, limit",
    [
        ("ssan_bigram_shift", "sentence", 2, 200),
        ("ssan_word_reordering", "token", 3, 200),
        ("ssan_tree_depth", "sentence", 4, 200),
        ("ssan_top_constituents", "sentence", 5, None),  # 5 balanced classes need the whole treebank
    ],
)
def test_ssan_tasks_follow_the_task_protocol(name, output, num_labels, limit):
    import structattn.tasks.ssan_bigram_shift  # noqa: F401  (registration)
    import structattn.tasks.ssan_top_constituents  # noqa: F401
    import structattn.tasks.ssan_tree_depth  # noqa: F401
    import structattn.tasks.ssan_word_reordering  # noqa: F401
    from structattn.tasks.base import get_task

    task = get_task(name, limit=limit, seed=3)
    assert task.output == output and task.num_labels == num_labels and task.options()["seed"] == 3
    splits = task.splits()
    sources = {k: {s.meta["source_id"] for s in v} for k, v in splits.items()}
    assert all(sources[k] for k in ("train", "dev", "test"))
    assert not (sources["train"] & sources["dev"]) and not (sources["train"] & sources["test"])
    for items in splits.values():
        for item in items:
            y = task.label(item)
            if output == "token":  # balanced scoring: one word of each class, the rest ignored
                assert len(y) == len(item) and sorted(y)[-3:] == [0, 1, 2] and y.count(-100) == len(item) - 3
            else:
                assert 0 <= y < num_labels
    train = [task.label(x) for x in splits["train"]]
    test = [task.label(x) for x in splits["test"]]
    assert task.baseline(train, test) is not None
    again = get_task(name, limit=limit, seed=3)
    assert [(x.words, again.label(x)) for x in again.splits()["test"]] == [(x.words, y) for x, y in zip(splits["test"], test)]
    if name != "ssan_bigram_shift":  # exactly balanced per split (bigram shift: up to one)
        for items in splits.values():
            labels = [task.label(x) for x in items]
            counts = Counter(y for t in labels for y in (t if isinstance(t, list) else [t]) if y != -100)
            assert len(counts) == num_labels and len(set(counts.values())) == 1, counts
        assert task.baseline(train, test) == pytest.approx(1 / num_labels)
    with pytest.raises(ValueError, match="not one of its examples"):
        task.label(hand_written()[0])


def test_unbalanced_options_of_the_reordering_and_top_constituent_tasks():
    from structattn.tasks.base import get_task

    tagging = get_task("ssan_word_reordering", limit=100, scoring="all")
    for item in tagging.splits()["test"]:
        y = tagging.label(item)
        assert sorted(y)[-2:] == [1, 2] and y.count(0) == len(item) - 2
    assert tagging.baseline([tagging.label(x) for x in tagging.splits()["train"]],
                            [tagging.label(x) for x in tagging.splits()["test"]]) > 0.8
    with pytest.raises(ValueError, match="scoring must be one of"):
        get_task("ssan_word_reordering", scoring="pointer")
    full = get_task("ssan_top_constituents", num_classes=20, relations="all", balance=False)
    train = [full.label(x) for x in full.splits()["train"]]
    assert len(train) == 800 and Counter(train).most_common(1)[0] == (19, 609)  # OTHER dominates
    with pytest.raises(ValueError, match="relations must be 'core', 'all' or a list"):
        get_task("ssan_top_constituents", relations="some")
    with pytest.raises(ValueError, match="split: cannot balance top-constituent classes"):
        get_task("ssan_top_constituents", limit=30, num_classes=8).splits()
