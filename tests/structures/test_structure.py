"""Structure fields, collate padding and dtypes."""

from __future__ import annotations

import pytest
import torch

from structattn.structures import Sentence, Structure, collate, get_provider


def _tree(n: int, sid: str) -> Sentence:
    return Sentence([f"w{i}" for i in range(n)], heads=[-1] + list(range(n - 1)), id=sid)


def test_collate_pads_with_minus_one_false_and_smallest_dtype() -> None:
    provider = get_provider("dependency")
    batch = collate([provider(_tree(2, "a")), provider(_tree(4, "b"))])
    assert batch.distance.shape == (2, 4, 4) and batch.distance.dtype == torch.int16
    assert batch.token_mask.tolist() == [[True, True, False, False], [True] * 4]
    assert (batch.distance[0, 2:] == -1).all() and (batch.distance[0, :, 2:] == -1).all()
    assert not batch.adjacency[0, 2:].any() and not batch.adjacency[0, :, 2:].any()
    assert batch.distance[1, 0, 3] == 3
    assert batch.ids == ["a", "b"]


def test_collate_rejects_mixed_fields_and_windows() -> None:
    dep = get_provider("dependency")(_tree(3, "a"))
    win = get_provider("window", radius=1)(_tree(3, "b"))
    with pytest.raises(ValueError, match="has 'distance'"):
        collate([dep, win])
    with pytest.raises(ValueError, match="window"):
        collate([win, get_provider("window", radius=2)(_tree(3, "c"))])
    with pytest.raises(ValueError, match="empty"):
        collate([])
    with pytest.raises(ValueError, match="already batched"):
        collate([collate([dep])])


def test_fields_and_require() -> None:
    dep = get_provider("dependency")(_tree(3, "a"))
    assert dep.fields() == {"distance", "adjacency", "token_mask"}
    with pytest.raises(ValueError, match=r"needs structure field\(s\) \['band'\].*'dependency'"):
        dep.require({"band"}, "variant 'local_global'")
    only_mask = Structure(token_mask=torch.ones(3, dtype=torch.bool))
    assert only_mask.fields() == {"token_mask"}


def test_permute_moves_rows_and_columns() -> None:
    st = get_provider("dependency")(_tree(4, "a"))
    perm = torch.tensor([2, 0, 3, 1])
    moved = st.permute(perm)
    for i in range(4):
        for j in range(4):
            assert moved.distance[i, j] == st.distance[perm[i], perm[j]]


def test_window_permute_materialises() -> None:
    st = get_provider("window", radius=1, global_tokens=[0])(_tree(4, "a"))
    moved = st.permute(torch.tensor([3, 2, 1, 0]))
    assert moved.window_radius is None and moved.distance is not None
    assert moved.distance[3].tolist() == [1, 1, 1, 0]


def test_invalid_structure_arguments() -> None:
    with pytest.raises(ValueError):
        Structure()
    with pytest.raises(ValueError, match="window_radius"):
        Structure(token_mask=torch.ones(2, dtype=torch.bool), window_radius=-1)
