"""When to hide progress bars: on request, and always under CI (the ``CI`` environment variable set)."""

from __future__ import annotations

import os


def progress_disabled(quiet: bool = False) -> bool:
    """``True`` when asked to be quiet or when ``$CI`` is ``1``, ``true`` or ``yes``."""
    return bool(quiet or os.environ.get("CI", "").lower() in ("1", "true", "yes"))
