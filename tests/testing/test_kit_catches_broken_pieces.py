"""The contract kit must fail on deliberately broken pieces, with a message naming the check: a variant that
lets padded keys get weight, an oracle that disagrees, a parameter without gradient, a provider that is not
symmetric although it claims to be, a provider whose cache key ignores an option. A correct outside variant
and provider pass. Every temporary registration is removed afterwards."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import pytest
import torch

from structattn.attention import ATTENTION, StructuredAttention
from structattn.structures import Structure
from structattn.structures.providers import PROVIDERS, StructureProvider
from structattn.testing import check_attention, check_provider


@contextlib.contextmanager
def registered(registry, name: str, cls: type):
    registry.register(name)(cls)
    try:
        yield cls
    finally:
        registry.unregister(name)


# -- attention --------------------------------------------------------------------------------------------
def masked_softmax_reference(q, k, v, structure, module):
    """float64 loops: each real query attends to the real keys of its sentence with softmax(q.k / sqrt(d))."""
    b, h, n, d = q.shape
    out = torch.zeros(b, h, n, d, dtype=torch.float64)
    weights = torch.zeros(b, h, n, n, dtype=torch.float64)
    for x in range(b):
        keys = [j for j in range(n) if structure.token_mask[x, j]]
        for head in range(h):
            for i in keys:
                scores = torch.stack([q[x, head, i].double() @ k[x, head, j].double() / math.sqrt(d) for j in keys])
                p = torch.softmax(scores, 0)
                for w, j in zip(p, keys):
                    weights[x, head, i, j] = w
                    out[x, head, i] = out[x, head, i] + w * v[x, head, j].double()
    return out, weights


class Plain(StructuredAttention):
    """Correct: softmax over the real keys."""

    def attend(self, q, k, v, structure, *, hidden, return_weights):
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (b, h, i, j)
        keys = structure.token_mask[:, None, None, :]
        weights = scores.masked_fill(~keys, -torch.finfo(scores.dtype).max).softmax(-1)
        return weights @ v, weights


class Leaky(StructuredAttention):
    """Broken: padded keys take part in the softmax."""

    def attend(self, q, k, v, structure, *, hidden, return_weights):
        weights = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1)
        return weights @ v, weights


class Unused(Plain):
    """Broken: a parameter that never reaches the output."""

    def __init__(self, num_heads: int, head_dim: int) -> None:
        super().__init__(num_heads, head_dim)
        self.temperature = torch.nn.Parameter(torch.ones(num_heads))


class CoarseUnderAutocast(Plain):
    """Broken only in bf16: under autocast it keeps the scores to two significant bits (a stand-in for a kernel
    that loses precision in bfloat16); float32 and float64 are exact."""

    def attend(self, q, k, v, structure, *, hidden, return_weights):
        if torch.is_autocast_enabled(q.device.type):
            q = q.float()
            q = torch.frexp(q).mantissa.mul(4).round().div(4) * torch.exp2(torch.frexp(q).exponent.float())
        return super().attend(q, k, v, structure, hidden=hidden, return_weights=return_weights)


def test_a_correct_outside_variant_passes_every_check(capsys):
    with registered(ATTENTION, "kit_plain", Plain):
        report = check_attention("kit_plain", masked_softmax_reference)
    assert report["reference"] == report["padding_invariance"] == report["nan_padding"] == "passed"
    assert report["bf16_autocast"] == "passed"
    assert report["reversal_equivariance"].startswith("skipped: not a position-based")
    assert "reversal_equivariance skipped" in capsys.readouterr().out
    assert "kit_plain" not in ATTENTION


def test_a_variant_that_lets_padded_keys_get_weight_fails():
    with registered(ATTENTION, "kit_leaky", Leaky):
        with pytest.raises(AssertionError, match=r"check_attention\('kit_leaky'\) failed reference: output vs "
                                                 r"reference: largest difference"):
            check_attention("kit_leaky", masked_softmax_reference)
        with pytest.raises(AssertionError, match=r"failed padding_invariance: real-token outputs with large finite "
                                                 r"garbage \(1e4\) in the padding.*largest difference"):
            check_attention("kit_leaky", masked_softmax_reference, checks=["padding_invariance"])
        with pytest.raises(AssertionError, match="failed weights_rows: padded keys must get no weight"):
            check_attention("kit_leaky", masked_softmax_reference, checks=["weights_rows"])
    assert "kit_leaky" not in ATTENTION


def test_a_reference_that_differs_fails_with_the_size_of_the_difference():
    def wrong_scale(q, k, v, structure, module):  # 1/d instead of 1/sqrt(d)
        return masked_softmax_reference(q * q.shape[-1] ** -0.5, k, v, structure, module)

    with registered(ATTENTION, "kit_plain", Plain):
        with pytest.raises(AssertionError, match=r"failed reference: output vs reference: largest difference [0-9.e-]+ "
                                                 r"at index \(\d+, \d+, \d+, \d+\)"):
            check_attention("kit_plain", wrong_scale)


def test_a_parameter_without_gradient_fails():
    with registered(ATTENTION, "kit_unused", Unused):
        with pytest.raises(AssertionError, match="failed parameter_gradients: parameter temperature got no gradient"):
            check_attention("kit_unused", masked_softmax_reference, checks=["parameter_gradients"])


def test_a_variant_that_loses_precision_under_bf16_autocast_fails():
    with registered(ATTENTION, "kit_coarse", CoarseUnderAutocast):
        check_attention("kit_coarse", masked_softmax_reference, checks=["reference", "half_precision"])
        with pytest.raises(AssertionError, match=r"failed bf16_autocast: bf16 output vs float64 reference: relative "
                                                 r"error [0-9.e-]+ > 0.02"):
            check_attention("kit_coarse", masked_softmax_reference, checks=["bf16_autocast"])


# -- providers --------------------------------------------------------------------------------------------
def forward_chain(n: int, max_hops: int) -> torch.Tensor:
    """distance[i, j] = j - i for 0 <= j - i <= max_hops, else -1 (a directed chain)."""
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    return torch.where((offset >= 0) & (offset <= max_hops), offset, torch.full_like(offset, -1))


class ForwardChain(StructureProvider):
    """Broken: directed, but claims symmetric = True."""

    symmetric = True

    def hops(self, n: int) -> int:
        return n

    def compute(self, items: list[Any]) -> Structure:
        lengths = [len(x) for x in items]
        n = max(lengths)
        token_mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
        real = token_mask[:, :, None] & token_mask[:, None, :]
        distance = torch.where(real, forward_chain(n, self.hops(n)), torch.full((len(items), n, n), -1)).to(torch.int16)
        return Structure(distance=distance, adjacency=(distance == 0) | (distance == 1), token_mask=token_mask)


class KeylessHops(ForwardChain):
    """Broken: ``max_hops`` changes the output but is declared ignored, so the cache key misses it."""

    symmetric = False
    options_ignored = ("max_hops",)

    def __init__(self, max_hops: int = 3) -> None:
        self.max_hops = max_hops

    def options(self) -> dict[str, Any]:
        return {}

    def hops(self, n: int) -> int:
        return self.max_hops


def test_a_provider_that_is_not_symmetric_although_it_claims_to_be_fails():
    oracle = lambda s: forward_chain(len(s), len(s))  # noqa: E731  (matches the provider: only symmetry is wrong)
    with registered(PROVIDERS, "kit_forward", ForwardChain):
        check_provider("kit_forward", oracle, checks=["oracle", "padding", "dtypes", "determinism"])
        with pytest.raises(AssertionError, match=r"check_provider\('kit_forward'\) failed symmetry: symmetric = True, "
                                                 r"but distance\[j, i\] != distance\[i, j\]: item '.*' \(\d+ tokens\)"):
            check_provider("kit_forward", oracle)
    assert "kit_forward" not in PROVIDERS


def test_a_provider_whose_cache_key_ignores_an_option_fails():
    oracle = lambda s: forward_chain(len(s), 3)  # noqa: E731
    with registered(PROVIDERS, "kit_keyless", KeylessHops):
        check_provider("kit_keyless", oracle, checks=["oracle", "padding", "dtypes", "determinism"])
        with pytest.raises(AssertionError, match=r"failed cache_key: the cache key ignores option 'max_hops': "
                                                 r"max_hops=3 and max_hops=4 give the same key"):
            check_provider("kit_keyless", oracle)
    assert "kit_keyless" not in PROVIDERS


def test_unregistering_an_unknown_name_is_an_error():
    with pytest.raises(ValueError, match="cannot unregister attention variant 'nope'"):
        ATTENTION.unregister("nope")


def test_registered_pieces_without_a_case_fail_naming_the_file_to_add():
    from tests.attention.cases import kit_case as attention_case
    from tests.structures.test_provider_contract import kit_case as provider_case

    with registered(ATTENTION, "kit_orphan", Plain):
        with pytest.raises(AssertionError, match="has no case module tests/attention/cases/kit_orphan.py"):
            attention_case("kit_orphan")
    with registered(PROVIDERS, "kit_orphan", ForwardChain):
        with pytest.raises(AssertionError, match=r"add @case\('kit_orphan'\) to tests/structures/test_provider_contract.py"):
            provider_case("kit_orphan")


def unzeroed_padding_reference(q, k, v, structure, module):
    """Right on real tokens, but the padded query rows keep a uniform average (not zeros)."""
    out, weights = masked_softmax_reference(q, k, v, structure, module)
    padded = ~structure.token_mask
    out[padded[:, None, :].expand(out.shape[:3])] = 1.0
    return out, weights


def test_an_oracle_that_does_not_zero_padded_rows_is_told_so():
    with registered(ATTENTION, "kit_plain", Plain):
        with pytest.raises(AssertionError, match="reference.*equal on real tokens but not on padded query rows.*"
                                                 "oracle must return zeros"):
            check_attention("kit_plain", unzeroed_padding_reference, checks=["reference"])


class DistanceReader(Plain):
    """Broken declaration: reads ``distance`` but does not list it in ``requires``."""

    def attend(self, q, k, v, structure, *, hidden, return_weights):
        near = structure.distance[:, None] >= 0  # (b, 1, i, j): raises on a structure without distances
        scores = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~near, -1e9)
        weights = scores.softmax(-1)
        return weights @ v, weights


def test_a_variant_without_requires_gets_an_assertion_naming_the_check():
    with registered(ATTENTION, "kit_undeclared", DistanceReader):
        with pytest.raises(AssertionError, match="missing_fields_at_call.*does not list in `requires`"):
            check_attention("kit_undeclared", masked_softmax_reference, checks=["missing_fields_at_call"])
