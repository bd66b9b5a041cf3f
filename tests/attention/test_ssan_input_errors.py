"""``ssan``'s inputs are checked before any kernel runs: integer, 3-D, non-tensor, mis-sized or empty q, k, v and
``hidden`` are a ``ValueError`` / ``TypeError`` naming the variant, the argument, what was received and what is
expected (not ``"normal_kernel_cpu" not implemented for 'Long'`` or "not enough values to unpack" from torch)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from structattn.attention import attention_names, get_attention
from tests.attention.cases import dependency_structure, load_case

B, H, N, D, DM = 2, 3, 7, 5, 11


@pytest.fixture
def ssan_inputs(generator):
    structure = dependency_structure([N, 5], generator)
    q, k, v = (torch.randn(B, H, N, D, generator=generator) for _ in range(3))
    hidden = torch.randn(B, N, DM, generator=generator)
    return get_attention("ssan", num_heads=H, head_dim=D, d_model=DM, generator=0), structure, q, k, v, hidden


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_integer_qkv_name_the_dtypes(ssan_inputs, train):
    module, structure, q, k, v, hidden = ssan_inputs
    module.train(train)
    ints = [torch.randint(-3, 4, (B, H, N, D)) for _ in range(3)]
    with pytest.raises(ValueError, match=exactly(
            "attention 'ssan': q, k, v must share one floating-point dtype, got q int64, k int64, v int64")):
        module(*ints, structure, hidden=hidden)
    with pytest.raises(ValueError, match=exactly(
            "attention 'ssan': hidden must be a floating-point (b, n, d_model) tensor, got hidden (2, 7, 11) int64")):
        module(q, k, v, structure, hidden=hidden.long())


def test_three_dimensional_qkv_and_two_dimensional_hidden_name_the_shapes(ssan_inputs):
    module, _, q, k, v, hidden = ssan_inputs
    with pytest.raises(ValueError, match=exactly(
            "attention 'ssan': q, k, v must be (b, h, n, d) with equal shapes, got q (3, 7, 5), k (3, 7, 5), "
            "v (3, 7, 5)")):
        module(q[0], k[0], v[0], None, hidden=hidden[0])
    with pytest.raises(ValueError, match=exactly(
            "attention 'ssan': hidden must be a floating-point (b, n, d_model) tensor, got hidden (7, 11) float32")):
        module(q, k, v, None, hidden=hidden[0])


def test_hidden_of_another_width_than_the_policys_is_named(ssan_inputs):
    module, structure, q, k, v, hidden = ssan_inputs
    with pytest.raises(ValueError, match=exactly(
            "attention 'ssan': hidden has width 10, expected d_model=11 (the policy's input width), got hidden "
            "(2, 7, 10)")):
        module(q, k, v, structure, hidden=hidden[..., :10])


@pytest.mark.parametrize("shape", [(B, H, 0, D), (0, H, N, D)], ids=["no-tokens", "no-sentences"])
def test_empty_inputs_are_refused_by_name(shape):
    """They failed inside the selection kernel (a reshape of 0 elements, a block size of 0)."""
    module = get_attention("ssan", num_heads=H, head_dim=D, d_model=DM, generator=0)
    q = torch.zeros(shape)
    with pytest.raises(ValueError, match=exactly(
            f"attention 'ssan': q, k, v need at least one sentence and one token, got q {shape} (b, h, n, d)")):
        module(q, q, q, None, hidden=torch.zeros(shape[0], shape[2], DM))


@pytest.mark.parametrize("name", attention_names())
def test_non_tensor_inputs_are_a_type_error_naming_the_argument(name, generator):
    case = load_case(name)
    structure = case.make_structure([N, 5], generator)
    q, k, v = (torch.randn(B, H, structure.num_tokens, D, generator=generator) for _ in range(3))
    hidden = torch.randn(B, structure.num_tokens, 15, generator=generator)
    module = case.make(H, D)
    with pytest.raises(TypeError, match=exactly(f"attention {name!r}: q must be a torch.Tensor (b, h, n, d), got list")):
        module(q.tolist(), k, v, structure, hidden=hidden)
    with pytest.raises(TypeError, match=exactly(
            f"attention {name!r}: v must be a torch.Tensor (b, h, n, d), got ndarray")):
        module(q, k, np.zeros(tuple(v.shape), dtype=np.float32), structure, hidden=hidden)
    with pytest.raises(TypeError, match=exactly(
            f"attention {name!r}: hidden must be a torch.Tensor (b, n, d_model), got ndarray")):
        module(q, k, v, structure, hidden=hidden.numpy())
    with pytest.raises(TypeError, match=exactly(f"attention {name!r}: structure must be a Structure (or None), got dict")):
        module(q, k, v, {"distance": structure.distance}, hidden=hidden)
