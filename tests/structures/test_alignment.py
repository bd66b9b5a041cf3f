"""Word -> subword expansion."""

from __future__ import annotations

import pytest

from structattn.structures import Sentence, get_provider
from structattn.structures.alignment import align_to_subwords


@pytest.fixture
def tree():
    s = Sentence(["unbelievable", "cats", "sleep"], heads=[1, 2, -1], id="sub")
    return get_provider("dependency")(s)


def test_pieces_inherit_word_distances(tree) -> None:
    word_ids = [None, 0, 0, 0, 1, 2, None]
    out = align_to_subwords(tree, word_ids)
    d = out.distance
    for t, wt in enumerate(word_ids):
        for u, wu in enumerate(word_ids):
            if t == u:
                assert d[t, u] == 0
            elif wt is None or wu is None:
                assert d[t, u] == -1 and not out.adjacency[t, u]
            elif wt == wu:
                assert d[t, u] == 0 and out.adjacency[t, u]
            else:
                assert d[t, u] == tree.distance[wt, wu]
    assert out.token_mask.all() and d.dtype == tree.distance.dtype


def test_piece_distance_option(tree) -> None:
    out = align_to_subwords(tree, [0, 0, 1, 2], piece_distance=1)
    assert out.distance[0, 1] == 1 and out.distance[0, 2] == 1 and out.distance[0, 3] == 2


def test_mismatched_segmentation_is_an_error(tree) -> None:
    with pytest.raises(ValueError, match=r"sentence 'sub': words \[2\] have no subword token"):
        align_to_subwords(tree, [0, 1, 1])
    with pytest.raises(ValueError, match="token 3 belongs to word 5"):
        align_to_subwords(tree, [0, 1, 2, 5])


def test_window_and_batched_rejected(tree) -> None:
    win = get_provider("window", radius=1)(Sentence(["a", "b"], id="w"))
    with pytest.raises(ValueError, match="position-based"):
        align_to_subwords(win, [0, 1])
    batched = get_provider("dependency").batch([Sentence(["a"], heads=[-1])])
    with pytest.raises(ValueError, match="one sentence"):
        align_to_subwords(batched, [0])
