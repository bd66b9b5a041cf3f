"""``--time-limit 1h30`` (a number left without its unit, as people write "one hour thirty"): refused with the
unit it most likely lacks, instead of the bare format list. A negative limit (a stop time computed in a script,
once that time has passed) is said to be in the past by the Python API too, not only by the command line."""

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


@pytest.mark.parametrize("limit", [-300, -0.5, "-5m", "-1h30m", "-300"])
def test_a_negative_limit_says_the_stop_time_has_passed(limit):
    with pytest.raises(ValueError, match=re.escape(
            f"a time limit of {limit!r} is negative: the time to stop at has already passed; nothing was run")):
        parse_duration(limit)


def test_the_api_refuses_a_limit_in_the_past_before_writing_anything(tmp_path):
    from structattn import api
    from tests.training.test_batch_tokens_misuse import TINY

    with pytest.raises(ValueError, match=r"a time limit of -300 is negative: the time to stop at has already passed"):
        api.compare(TINY, tmp_path / "out", quiet=True, plots=False, threads=1, time_limit=-300)
    assert not (tmp_path / "out").exists()
