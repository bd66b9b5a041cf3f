"""structattn.encoders.Dropout: nn.Dropout's semantics, a cheaper mask on half-precision inputs."""

import pytest
import torch
from torch import nn

from structattn.encoders import Dropout


def test_float32_draws_exactly_what_nn_dropout_draws():
    x = torch.randn(3, 5, 7)
    torch.manual_seed(4)
    ours = Dropout(0.3)(x)
    torch.manual_seed(4)
    theirs = nn.Dropout(0.3)(x)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_drop_with_probability_p_and_scale_the_rest(dtype):
    torch.manual_seed(0)
    p, n = 0.3, 1_000_000
    x = torch.full((n,), 2.0, dtype=dtype, requires_grad=True)
    out = Dropout(p)(x)
    assert out.dtype == dtype
    kept = out != 0
    # the kept share of a million draws lies within 10 standard deviations (4.6e-4 each) of 1 - p
    assert abs(kept.float().mean().item() - (1 - p)) < 10 * (p * (1 - p) / n) ** 0.5
    assert torch.equal(out[kept], torch.full_like(out[kept], 2.0 / (1 - p)))
    out.sum().backward()
    expected_grad = torch.where(kept, torch.tensor(1 / (1 - p), dtype=dtype), torch.tensor(0.0, dtype=dtype))
    assert torch.equal(x.grad, expected_grad)


def test_eval_and_edge_probabilities_are_identity_or_zero():
    x = torch.randn(4, 6).bfloat16()
    layer = Dropout(0.5).eval()
    assert torch.equal(layer(x), x)
    assert torch.equal(Dropout(0.0)(x), x)
    assert torch.equal(Dropout(1.0)(x), torch.zeros_like(x))


def test_inplace_half_dropout_writes_into_its_input():
    torch.manual_seed(1)
    x = torch.ones(1000, dtype=torch.bfloat16)
    out = Dropout(0.5, inplace=True)(x)
    assert out.data_ptr() == x.data_ptr()
    assert set(out.unique().tolist()) == {0.0, 2.0}
