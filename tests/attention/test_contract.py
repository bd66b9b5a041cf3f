"""The attention contract for every registered variant, run through the installed kit ``structattn.testing``
exactly as a user's plugin would be: one test per (variant, check), so a failure reads
``test_contract[soft_bias-padding_invariance]``.

Each variant's case (builder, structure, float64 oracle) lives in ``tests/attention/cases/<name>.py``; a
registered variant without one fails naming the file to add. Sizes b=2, h=3, n=7, d=5 (the kit's).
"""

from __future__ import annotations

import pytest

from structattn.attention import attention_names
from structattn.testing import ATTENTION_CHECKS, Skipped
from tests.attention.cases import kit_case


@pytest.mark.parametrize("name", attention_names())
def test_case_module_exists(name):
    kit_case(name)


@pytest.mark.parametrize("check", list(ATTENTION_CHECKS))
@pytest.mark.parametrize("name", attention_names())
def test_contract(name, check):
    case = kit_case(name)
    try:
        ATTENTION_CHECKS[check](case)
    except Skipped as skip:
        pytest.skip(f"{name}: {skip}")
