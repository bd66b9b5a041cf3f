"""Checks of user-given integers: no silent truncation (``1.7 -> 1``), no booleans taken for ``0`` / ``1``."""

from __future__ import annotations

import operator
from typing import Any


def as_index(value: Any, what: str) -> int:
    """``value`` as an ``int`` when it is an integer (``int``, numpy / torch integer scalars); else
    ``ValueError`` starting with ``what`` (e.g. ``"sentence 's1': token 3 head"``).

    Floats are rejected even when integral (``2.0``): they come from arithmetic that went wrong, and
    ``True`` / ``False`` are not indices.
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ValueError(f"{what} is {value!r}, a boolean; expected an integer")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} is {value!r} ({type(value).__name__}); expected an integer") from None


def int_option(value: Any, name: str, who: str, minimum: int | None = None) -> int:
    """An integer option of ``who`` (a provider, ...), at least ``minimum``; ``ValueError`` naming both."""
    number = as_index(value, f"{who}: {name}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {number}")
    return number
