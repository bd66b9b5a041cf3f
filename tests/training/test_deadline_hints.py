"""``--time-limit 1h30`` (a number left without its unit, as people write "one hour thirty"): refused with the
unit it most likely lacks, instead of the bare format list."""

from __future__ import annotations

import re

import pytest

from structattn.training.deadline import parse_duration


@pytest.mark.parametrize("given, meant", [("1h30", "1h30m"), ("2m30", "2m30s"), ("1d12", "1d12h"), (" 1H30 ", "1h30m")])
def test_a_trailing_number_without_a_unit_is_refused_naming_the_likely_unit(given, meant):
    with pytest.raises(ValueError, match=re.escape(
            f"got {given!r} (the last number has no unit: did you mean {meant!r}?)")):
        parse_duration(given)
    assert parse_duration(meant) > 0


def test_other_bad_durations_keep_the_format_list_alone():
    for bad in ("5s3", "abc", "1e3s"):
        with pytest.raises(ValueError, match=r"or seconds, got '[^']+'$"):
            parse_duration(bad)
