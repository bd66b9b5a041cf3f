"""The chunked label-smoothed cross-entropy against a naive float64 reference and against torch's own."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from structattn.seq2seq.chunked_loss import chunked_cross_entropy


def naive_smoothed_ce(logits: torch.Tensor, target: torch.Tensor, eps: float, ignore_index: int) -> torch.Tensor:
    """Per-row loop in float64, from the definition: the target distribution puts 1 - eps + eps / V on the gold
    class and eps / V on every other; the loss is its cross-entropy with softmax(z), averaged over kept rows."""
    rows, vocab = logits.shape
    terms = []
    for i in range(rows):
        if int(target[i]) == ignore_index:
            continue
        z = logits[i].double()
        log_p = z - torch.log(torch.exp(z - z.max()).sum()) - z.max()
        wanted = torch.full((vocab,), eps / vocab, dtype=torch.float64)
        wanted[int(target[i])] += 1.0 - eps
        terms.append(-(wanted * log_p).sum())
    return torch.stack(terms).mean() if terms else torch.tensor(math.nan, dtype=torch.float64)


def case(rows: int = 11, vocab: int = 13, dtype: torch.dtype = torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(rows, vocab, generator=g) * 4).to(dtype)
    target = torch.randint(1, vocab, (rows,), generator=g)
    target[[2, 7]] = 0  # two ignored rows
    return logits, target


def loss_and_grad(fn, logits: torch.Tensor, *args):
    leaf = logits.clone().requires_grad_()
    loss = fn(leaf, *args)
    loss.backward()
    return loss.detach(), leaf.grad


@pytest.mark.parametrize("chunk_rows", [1, 3, 4, 11, 64])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.6])
def test_float64_matches_the_naive_reference_in_value_and_gradient(eps, chunk_rows):
    logits, target = case(dtype=torch.float64)
    want, want_grad = loss_and_grad(naive_smoothed_ce, logits, target, eps, 0)
    got, got_grad = loss_and_grad(chunked_cross_entropy, logits, target, eps, 0, chunk_rows)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-5, atol=1e-7)
    assert (got_grad[[2, 7]] == 0).all()  # ignored rows get no gradient


@pytest.mark.parametrize("dtype, rtol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_matches_torch_cross_entropy_on_float32_and_bf16_logits(dtype, rtol):
    """Both sum in float32, so values agree to float32 rounding; a bf16 gradient agrees to bf16 rounding."""
    logits, target = case(rows=37, vocab=101, dtype=dtype, seed=3)
    plain = lambda z, t: F.cross_entropy(z.float(), t, ignore_index=0, label_smoothing=0.1)  # noqa: E731
    want, want_grad = loss_and_grad(plain, logits, target)
    got, got_grad = loss_and_grad(chunked_cross_entropy, logits, target, 0.1, 0, 8)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert got_grad.dtype == dtype
    torch.testing.assert_close(got_grad.float(), want_grad.float(), rtol=rtol, atol=rtol * want_grad.abs().max().item())


def test_a_scaled_upstream_gradient_scales_the_logits_gradient():
    logits, target = case()
    _, once = loss_and_grad(chunked_cross_entropy, logits, target, 0.1)
    leaf = logits.clone().requires_grad_()
    (3.0 * chunked_cross_entropy(leaf, target, 0.1)).backward()
    torch.testing.assert_close(leaf.grad, 3.0 * once)


def test_another_ignore_index_is_honoured():
    logits, target = case()
    target[5] = 4
    want, want_grad = loss_and_grad(naive_smoothed_ce, logits.double(), target, 0.1, 4)
    got, got_grad = loss_and_grad(chunked_cross_entropy, logits.double(), target, 0.1, 4, 3)
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-5, atol=1e-7)


def test_every_row_ignored_gives_nan_as_torch_does():
    logits, target = case()
    target.zero_()
    assert math.isnan(float(chunked_cross_entropy(logits, target, 0.1)))
    assert math.isnan(float(F.cross_entropy(logits, target, ignore_index=0, label_smoothing=0.1)))


def test_under_bf16_autocast_the_sums_stay_float32():
    logits, target = case(rows=20, vocab=50, dtype=torch.bfloat16, seed=5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = chunked_cross_entropy(logits, target, 0.1)
    want = naive_smoothed_ce(logits.double(), target, 0.1, 0)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("logits_shape, target_shape, kwargs, message", [
    ((4, 5, 6), (4, 5), {}, r"logits must be \(rows, V\) and target \(rows,\), got \(4, 5, 6\) and \(4, 5\)"),
    ((4, 6), (3,), {}, r"got \(4, 6\) and \(3,\)"),
    ((4, 6), (4,), {"label_smoothing": 1.0}, r"label_smoothing must be in \[0, 1\), got 1.0"),
    ((4, 6), (4,), {"chunk_rows": 0}, "chunk_rows must be >= 1, got 0"),
])
def test_bad_arguments_are_refused_by_name(logits_shape, target_shape, kwargs, message):
    with pytest.raises(ValueError, match=message):
        chunked_cross_entropy(torch.zeros(logits_shape), torch.ones(target_shape, dtype=torch.long), **kwargs)


def test_no_float32_tensor_of_all_rows_is_materialised():
    """The point of chunking: forward and backward never hold float32 (rows, V) logits or gradients (at the
    Multi30k size such a tensor is 60-80 MB, allocated and page-faulted in afresh every step)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Shapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.float32_shapes = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                    self.float32_shapes.add(tuple(t.shape))
            return out

    logits, target = case(rows=37, vocab=101, dtype=torch.bfloat16, seed=7)
    leaf = logits.clone().requires_grad_()
    with Shapes() as seen:
        chunked_cross_entropy(leaf, target, 0.1, chunk_rows=8).backward()
    assert (8, 101) in seen.float32_shapes  # the chunks were float32
    assert not any(len(s) == 2 and s[0] > 8 for s in seen.float32_shapes), seen.float32_shapes
    with Shapes() as plain:
        F.cross_entropy(logits.float().requires_grad_(), target, ignore_index=0, label_smoothing=0.1).backward()
    assert (37, 101) in plain.float32_shapes  # the check sees torch's whole-tensor path
