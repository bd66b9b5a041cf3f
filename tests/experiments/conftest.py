"""Tests here build tiny models: one intra-op thread (see tests/threads.py)."""

from tests.threads import one_thread  # noqa: F401  (autouse fixture)
