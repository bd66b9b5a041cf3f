"""Running named checks: failures become ``AssertionError`` naming the piece and the check; skips print why."""

from __future__ import annotations

from collections.abc import Callable


class Skipped(Exception):
    """Raised by a check that does not apply to the piece; the message says why."""


def run_checks(kind: str, name: str, checks: dict[str, Callable[[], None]]) -> dict[str, str]:
    """Run every check; ``{check: "passed" | "skipped: REASON"}``. The first failure raises
    ``AssertionError("check_KIND('NAME') failed CHECK: DETAIL")``."""
    report = {}
    for label, check in checks.items():
        try:
            check()
        except Skipped as skip:
            print(f"check_{kind}({name!r}): {label} skipped: {skip}")
            report[label] = f"skipped: {skip}"
            continue
        except AssertionError as err:
            raise AssertionError(f"check_{kind}({name!r}) failed {label}: {err}") from err
        report[label] = "passed"
    return report


def expect(condition: bool, message: str) -> None:
    """``assert`` that survives ``python -O``."""
    if not condition:
        raise AssertionError(message)
