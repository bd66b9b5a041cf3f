"""The attention contract, checked for every registered variant through its case module.

See ``structattn.attention.base`` for the contract and ``tests/attention/cases/__init__.py`` for the case
protocol. Everything is compared against the variant's float64 oracle with b=2, h=3, n=7, d=5.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from structattn.attention import attention_names
from structattn.structures import FIELDS, Structure
from tests.attention.cases import fill_padding, load_case, pad_structure, random_qkv
from tests.attention.conftest import LENGTHS, B, D, H, N

NAMES = attention_names()
TOL = {"atol": 1e-9, "rtol": 1e-7}


@pytest.fixture(params=NAMES)
def name(request) -> str:
    return request.param


@pytest.fixture
def case(name):
    return load_case(name)


def make_inputs(case, generator, dtype=torch.float64, lengths=LENGTHS):
    structure = case.make_structure(lengths, generator)
    q, k, v = random_qkv(B, H, structure.num_tokens, D, generator, dtype)
    hidden = None
    if case.needs_hidden():
        hidden = torch.randn(B, structure.num_tokens, H * D, generator=generator, dtype=dtype).requires_grad_()
    return structure, q, k, v, hidden


def call(module, q, k, v, structure, hidden, **kwargs):
    return module(q, k, v, structure, hidden=hidden, **kwargs)


def leaves(module, q, k, v, hidden):
    named = {"q": q, "k": k, "v": v, **({"hidden": hidden} if hidden is not None else {})}
    named.update({f"param {n}": p for n, p in module.named_parameters() if p.requires_grad})
    return named


def test_case_module_exists(name):
    case = load_case(name)
    for hook in ("make", "make_structure", "reference", "needs_hidden"):
        assert callable(getattr(case, hook, None)), f"tests/attention/cases/{name}.py lacks {hook}()"


def test_output_shape(case, generator):
    module = case.make(H, D)
    structure, q, k, v, hidden = make_inputs(case, generator, torch.float32)
    out, weights = call(module, q, k, v, structure, hidden, return_weights=True)
    assert out.shape == (B, H, N, D) and out.dtype == torch.float32
    assert weights.shape == (B, H, N, N)
    assert call(module, q, k, v, structure, hidden).shape == (B, H, N, D)


def test_outputs_and_gradients_match_reference(case, generator):
    module = case.make(H, D).double().train()
    structure, q, k, v, hidden = make_inputs(case, generator)
    out = call(module, q, k, v, structure, hidden)
    ref_out, _ = case.reference(module, q, k, v, structure, hidden)
    torch.testing.assert_close(out, ref_out, **TOL)
    grad_out = torch.randn(out.shape, generator=generator, dtype=out.dtype)
    named = leaves(module, q, k, v, hidden)
    got = torch.autograd.grad(out, list(named.values()), grad_out, allow_unused=True)
    want = torch.autograd.grad(ref_out, list(named.values()), grad_out, allow_unused=True)
    for label, g, w in zip(named, got, want):
        g = torch.zeros_like(named[label]) if g is None else g
        w = torch.zeros_like(named[label]) if w is None else w
        torch.testing.assert_close(g, w, **TOL, msg=lambda m, label=label: f"gradient of {label}: {m}")
    out_w, weights = call(module, q, k, v, structure, hidden, return_weights=True)
    ref_out, ref_weights = case.reference(module, q, k, v, structure, hidden)
    torch.testing.assert_close(out_w, ref_out, **TOL)
    torch.testing.assert_close(weights, ref_weights, **TOL)


def test_padding_invariance(case, generator):
    module = case.make(H, D).double().eval()
    structure, q, k, v, hidden = make_inputs(case, generator)
    mask = structure.token_mask
    base = call(module, *(fill_padding(x, mask, -3e3, 2) for x in (q, k, v)), structure,
                None if hidden is None else fill_padding(hidden, mask, -3e3, 1))
    padded = pad_structure(structure, 3)
    pmask = padded.token_mask

    def extend(x, dim):
        pad_shape = list(x.shape)
        pad_shape[dim] = 3
        return fill_padding(torch.cat([x, torch.zeros(pad_shape, dtype=x.dtype)], dim), pmask, 1e4, dim)

    out = call(module, extend(q, 2), extend(k, 2), extend(v, 2), padded, None if hidden is None else extend(hidden, 1))
    real = mask[:, None, :, None].expand_as(base)
    torch.testing.assert_close(out[:, :, :N][real], base[real], **TOL)
    assert torch.all(out[:, :, :N][~real] == 0) and torch.all(out[:, :, N:] == 0), "padded query rows must be zero"
    assert torch.all(base[~real] == 0), "padded query rows must be zero"


def test_rows_without_allowed_keys_are_finite(case, generator):
    module = case.make(H, D).train()
    structure, q, k, v, hidden = make_inputs(case, generator, torch.float32, lengths=[N, 1])
    variants = [structure]
    if structure.distance is not None:
        nothing = torch.full_like(structure.distance, -1)
        adjacency = None if structure.adjacency is None else torch.zeros_like(structure.adjacency)
        variants.append(replace(structure, distance=nothing, adjacency=adjacency))
    else:
        print(f"{case.__name__}: window-form structure, only the heavy-padding case is checked")
    for s in variants:
        out, weights = call(module, q, k, v, s, hidden, return_weights=True)
        assert torch.isfinite(out).all() and torch.isfinite(weights).all()
        grads = torch.autograd.grad(call(module, q, k, v, s, hidden).sum(), [q, k, v])
        assert all(torch.isfinite(g).all() for g in grads)
        empty = weights.sum(-1) == 0  # (b, h, n): rows that attended to nothing
        assert torch.all(out[empty] == 0), "a row with no allowed key must output zeros"
        assert torch.all(out[1, :, 1:] == 0), "padded query rows must be zero"


def test_permutation_equivariance(case, generator):
    module = case.make(H, D).double().eval()
    structure, q, k, v, hidden = make_inputs(case, generator)
    if structure.window_radius is not None:
        pytest.skip("position-based (window) structure: not permutation-equivariant; see the reversal test")
    perm = torch.randperm(N, generator=generator)
    out = call(module, q, k, v, structure, hidden)
    hidden_p = None if hidden is None else hidden[:, perm]
    out_p = call(module, q[:, :, perm], k[:, :, perm], v[:, :, perm], structure.permute(perm), hidden_p)
    torch.testing.assert_close(out_p, out[:, :, perm], **TOL)


def test_reversal_equivariance_of_window_structures(case, generator):
    module = case.make(H, D).double().eval()
    structure, q, k, v, hidden = make_inputs(case, generator)
    if structure.window_radius is None:
        pytest.skip("not position-based: test_permutation_equivariance covers it")
    flip = {"token_mask": structure.token_mask.flip(-1)}
    if structure.is_global is not None:
        flip["is_global"] = structure.is_global.flip(-1)
    out = call(module, q, k, v, structure, hidden)
    hidden_r = None if hidden is None else hidden.flip(1)
    out_r = call(module, q.flip(2), k.flip(2), v.flip(2), replace(structure, **flip), hidden_r)
    torch.testing.assert_close(out_r, out.flip(2), **TOL)


def test_eval_is_deterministic(case, generator):
    module = case.make(H, D).eval()
    structure, q, k, v, hidden = make_inputs(case, generator, torch.float32)
    assert torch.equal(call(module, q, k, v, structure, hidden), call(module, q, k, v, structure, hidden))


def test_every_parameter_gets_a_gradient(case, generator):
    module = case.make(H, D).train()
    structure, q, k, v, hidden = make_inputs(case, generator, torch.float32)
    out = call(module, q, k, v, structure, hidden)
    (out * torch.randn(out.shape, generator=generator)).sum().backward()
    for label, p in module.named_parameters():
        assert p.grad is not None, f"parameter {label} got no gradient"
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, f"parameter {label}: gradient {p.grad}"


def test_missing_fields_rejected_at_build_time(case):
    cls = type(case.make(H, D))
    cls.check_fields(set(FIELDS))
    for field in cls.requires:
        with pytest.raises(ValueError, match=field):
            cls.check_fields(set(FIELDS) - {field})


def test_missing_fields_rejected_at_call_time(case, generator):
    module = case.make(H, D)
    structure, q, k, v, hidden = make_inputs(case, generator, torch.float32)
    bare = Structure(token_mask=structure.token_mask)
    if set(module.requires) - bare.fields():
        with pytest.raises(ValueError, match="needs structure field"):
            call(module, q, k, v, bare, hidden)
    else:
        assert call(module, q, k, v, bare, hidden).shape == q.shape


def test_weights_rows_sum_to_one(case, generator):
    module = case.make(H, D).double().eval()
    structure, q, k, v, hidden = make_inputs(case, generator)
    _, weights = call(module, q, k, v, structure, hidden, return_weights=True)
    mask = structure.token_mask
    sums = weights.sum(-1)  # (b, h, n)
    real = mask[:, None, :].expand_as(sums)
    torch.testing.assert_close(sums[real], torch.ones_like(sums[real]), **TOL)
    assert torch.all(sums[~real] == 0), "padded query rows must have all-zero weights"
    assert torch.all(weights.transpose(-1, -2)[~real] == 0), "padded keys must get no weight"


def test_half_precision_inputs(case, generator):
    """A bf16 model on bf16 inputs: output in bf16, close to the float64 run of the same rounded values."""
    module = case.make(H, D).eval().to(torch.bfloat16)
    structure, q, k, v, hidden = make_inputs(case, generator, torch.bfloat16)
    inputs = [x.detach() for x in (q, k, v)] + [None if hidden is None else hidden.detach()]
    out = call(module, *inputs[:3], structure, inputs[3])
    assert out.dtype == torch.bfloat16
    wide = [None if x is None else x.double() for x in inputs]
    want = call(copy.deepcopy(module).double(), *wide[:3], structure, wide[3])
    torch.testing.assert_close(out.double(), want, atol=3e-2, rtol=3e-2)
