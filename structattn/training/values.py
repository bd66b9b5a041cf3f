"""Type checks of configuration values, with errors that name the setting (``training.max_steps``)."""

from __future__ import annotations

import math
from typing import Any


def as_int(name: str, value: Any) -> int:
    """``value`` as an ``int``: ints, and floats without a fractional part (``1e3``); never bools or text.

    Raises:
        ValueError: ``"training.max_steps must be an integer, got 'ten'"``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def as_float(name: str, value: Any) -> float:
    """``value`` as a ``float``: ints and floats; never bools or text (``"1e-3"`` is a string in gin)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def as_bool(name: str, value: Any) -> bool:
    """``value`` when it is ``True`` or ``False`` (not 0/1, not text)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value
