"""Progress bars, and when to hide them: on request, and always under CI (the ``CI`` environment variable set)."""

from __future__ import annotations

import os
from typing import Any


#: Set to 1 to hide every progress bar, in Python too; a command's ``--quiet`` sets it while the command runs, so
#: that bars made where no ``quiet`` argument reaches (a task's data preparation) are hidden as well.
QUIET_ENV = "STRUCTATTN_QUIET"


def progress_disabled(quiet: bool = False) -> bool:
    """``True`` when asked to be quiet, or when ``$STRUCTATTN_QUIET`` or ``$CI`` is ``1``, ``true`` or ``yes``."""
    return bool(quiet or any(os.environ.get(name, "").lower() in ("1", "true", "yes") for name in ("CI", QUIET_ENV)))


def progress_bar(iterable: Any = None, *, quiet: bool = False, **kwargs: Any) -> Any:
    """A ``tqdm.auto`` bar over ``iterable`` (or a manual one: ``total=...``), hidden when
    :func:`progress_disabled` says so; ``kwargs`` go to tqdm. Every long loop's bar is made here."""
    from tqdm.auto import tqdm

    return tqdm(iterable, disable=progress_disabled(quiet), **kwargs)
