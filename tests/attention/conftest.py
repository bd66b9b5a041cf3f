"""Fixtures shared by the attention tests (contract and per-variant).

Sizes are pairwise distinct so that axis mix-ups fail: b=2, h=3, n=7, d=5; the second sentence is padded.
"""

from __future__ import annotations

import pytest
import torch

B, H, N, D = 2, 3, 7, 5
LENGTHS = [7, 5]


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(20240531)


@pytest.fixture
def sizes() -> tuple[int, int, int, int]:
    return B, H, N, D


@pytest.fixture
def lengths() -> list[int]:
    return list(LENGTHS)


def pytest_collection_modifyitems(config, items):
    """GPU tests are skipped on machines without CUDA, with the reason printed (``-ra``)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA device; torch {torch.__version__} sees none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
