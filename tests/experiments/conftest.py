"""Tests here build tiny models: one intra-op thread (see tests/threads.py)."""

import pytest

from tests.threads import one_thread  # noqa: F401  (autouse fixture)


@pytest.fixture
def trained(monkeypatch):
    """The run ids a test's comparisons train (runs kept on resume or copied by --reuse are not trained)."""
    import structattn.experiments.compare as compare_module

    ids = []
    real = compare_module.execute
    monkeypatch.setattr(compare_module, "execute", lambda spec, *a, **k: ids.append(spec.run_id) or real(spec, *a, **k))
    return ids
