"""A wall-clock deadline for training: ``structattn compare --time-limit 2h40m`` and ``compare(time_limit=...)``.

Inside :func:`deadline`, a training loop checks the clock after every optimiser step; once the deadline has
passed it writes its resumable ``last.pt`` (mid-interval: loop position, optimiser, schedule and random state
are all in it) and raises :class:`TimeLimitReached`. ``--resume`` then continues the run from that step,
exactly as an uninterrupted run would have gone on (the batch order and the random state are restored).
An evaluation or a final test decoding that has started is finished first, so a limit is overrun by at most
one of those.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator

_deadline: float | None = None  # time.monotonic() value, or None: no limit

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class TimeLimitReached(Exception):
    """Training stopped at the deadline; ``checkpoint`` is the ``last.pt`` it continues from (``None``: the
    run had not started), ``step`` the step it reached."""

    def __init__(self, step: int, checkpoint: str | None, run_id: str | None = None) -> None:
        self.step, self.checkpoint, self.run_id = step, checkpoint, run_id
        where = f"run {run_id}: " if run_id else ""
        super().__init__(f"{where}time limit reached at step {step}"
                         + (f"; continue from {checkpoint}" if checkpoint else " (nothing saved: no checkpoint folder)"))


def parse_duration(text: str | float | int) -> float:
    """Seconds in ``"2h40m"``, ``"90m"``, ``"1d"``, ``"45s"``, ``"1h30m15s"`` or a plain number of seconds.

    Raises:
        ValueError: anything else, or a duration that is not positive (a negative one: said to be in the past).
    """
    if isinstance(text, bool):
        raise ValueError(f"a time limit must be a duration like '2h40m' or seconds, got {text!r}")
    if _is_negative(text):
        raise ValueError(f"a time limit of {text!r} is negative: the time to stop at has already passed; nothing "
                         "was run (give the time left, e.g. '2h40m')")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        spec = text.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(\.\d+)?", spec):
            seconds = float(spec)
        elif spec and re.fullmatch(r"(\d+(\.\d+)?[dhms])+", spec):
            seconds = sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([dhms])", spec))
        else:
            raise ValueError(f"a time limit must be a duration like '2h40m', '90m', '45s' or seconds, got {text!r}"
                             + _unit_hint(spec))
    if not seconds > 0:
        raise ValueError(f"a time limit must be positive, got {text!r}")
    return seconds


def _is_negative(text: str | float | int) -> bool:
    """A negative number of seconds, or a duration with a minus sign before it (``'-300s'``, ``'-1h30m'``): what
    a stop time computed in a script gives once that time has passed."""
    if isinstance(text, (int, float)):
        return text < 0
    spec = text.strip().lower().replace(" ", "")
    return spec.startswith("-") and bool(re.fullmatch(r"-(\d+(\.\d+)?|(\d+(\.\d+)?[dhms])+)", spec))


def _unit_hint(spec: str) -> str:
    """For ``'1h30'`` (a number left without its unit after a unit): which unit it most likely lacks."""
    match = re.fullmatch(r"((?:\d+(?:\.\d+)?[dhms])+?)(\d+(?:\.\d+)?)", spec)
    if not match:
        return ""
    following = {"d": "h", "h": "m", "m": "s"}.get(match.group(1)[-1])
    return f" (the last number has no unit: did you mean {match.group(0) + following!r}?)" if following else ""


def format_duration(seconds: float) -> str:
    """``9600`` -> ``"2h40m"``; whole seconds."""
    seconds = int(round(seconds))
    parts = [(seconds // 3600, "h"), (seconds % 3600 // 60, "m"), (seconds % 60, "s")]
    return "".join(f"{n}{u}" for n, u in parts if n) or "0s"


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Training inside the block stops (see the module docstring) ``seconds`` from now; ``None``: no limit."""
    global _deadline
    before = _deadline
    _deadline = None if seconds is None else time.monotonic() + seconds
    try:
        yield
    finally:
        _deadline = before


def past_deadline() -> bool:
    """Whether a deadline is set and has passed."""
    return _deadline is not None and time.monotonic() >= _deadline


def seconds_left() -> float | None:
    """Seconds to the deadline (negative once past), or ``None`` without one."""
    return None if _deadline is None else _deadline - time.monotonic()
