"""Shared fixture: tiny models and tensors run fastest on one intra-op thread, and do not spin against other
processes on a shared CPU (measured here up to 25x slower with the default two threads under load).

Import ``one_thread`` into a conftest or test module to apply it (it is autouse there)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
