"""grammar_depth: labels are networkx shortest-path depths, and growing train leaves dev and test alone."""

import networkx as nx
import pytest

from structattn.tasks.base import get_task


def test_labels_are_tree_depths_clipped():
    task = get_task("grammar_depth", max_depth=2, train=5, dev=2, test=2, seed=3)
    for s in task.splits()["train"]:
        tree = nx.Graph([(i, h) for i, h in enumerate(s.heads) if h >= 0])
        tree.add_nodes_from(range(len(s)))
        depth = nx.single_source_shortest_path_length(tree, s.heads.index(-1))
        assert task.label(s) == [min(depth[i], 2) for i in range(len(s))]


def test_train_size_leaves_dev_and_test_unchanged():
    small = get_task("grammar_depth", train=3, dev=4, test=5).splits()
    large = get_task("grammar_depth", train=30, dev=4, test=5).splits()
    for split in ("dev", "test"):
        assert [s.words for s in small[split]] == [s.words for s in large[split]]
    assert [s.words for s in large["train"][:3]] == [s.words for s in small["train"]]


def test_bad_max_depth_is_rejected():
    with pytest.raises(ValueError, match="max_depth"):
        get_task("grammar_depth", max_depth=0)
