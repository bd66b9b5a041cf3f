"""The compact window form: ``distance`` stays ``None``; ``dense_distance`` builds what the docstring says."""

from __future__ import annotations

import torch

from structattn.structures import Sentence, collate, get_provider


def naive_band(n: int, radius: int, dilation: int, globals_: set[int]) -> list[list[int]]:
    """1 to and from a global token, else |i - j| inside the dilated band, -1 elsewhere (per-pair loops)."""
    out = []
    for i in range(n):
        row = []
        for j in range(n):
            if i == j:
                row.append(0)
            elif i in globals_ or j in globals_:
                row.append(1)
            elif abs(i - j) <= radius * dilation and abs(i - j) % dilation == 0:
                row.append(abs(i - j))
            else:
                row.append(-1)
        out.append(row)
    return out


def test_window_keeps_only_the_compact_form_and_dense_distance_builds_it():
    sentences = [Sentence([f"w{i}" for i in range(n)], id=f"s{n}") for n in (7, 5)]
    provider = get_provider("window", radius=2, dilation=2, global_tokens=[0])
    one = provider(sentences[0])
    assert one.distance is None and one.adjacency is None  # never built by reading attributes
    assert {"distance", "adjacency", "band", "is_global"} <= one.fields()
    assert one.dense_distance().tolist() == naive_band(7, 2, 2, {0})
    assert torch.equal(one.dense_adjacency(), one.dense_distance() >= 0)
    dense = one.materialise()
    assert dense.distance.tolist() == naive_band(7, 2, 2, {0}) and dense.adjacency is not None
    batch = collate([provider(s) for s in sentences])
    assert batch.distance is None and batch.window_radius == 2
    padded = batch.dense_distance()
    assert padded.shape == (2, 7, 7)
    assert padded[1, :5, :5].tolist() == naive_band(5, 2, 2, {0})
    assert bool((padded[1, 5:] == -1).all()) and bool((padded[1, :, 5:] == -1).all())
