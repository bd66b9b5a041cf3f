"""The bias hook (``BiasedAttention``): a user's variant defined here in a few lines, registered, checked against
a float64 oracle (outputs and gradients, sigma included), with padding garbage, and its sigma reported through
``learned_quantities()`` to the encoder and the experiment records; plus the built-in variants' reports."""

from __future__ import annotations

import math
import random

import pytest
import torch
from torch import nn

from structattn.attention import ATTENTION, get_attention, register_attention
from structattn.attention.biased import BiasedAttention
from structattn.attention.learned import LearnedQuantity
from structattn.structures import Structure
from tests.attention.cases import dependency_structure, fill_padding, random_qkv
from tests.attention.conftest import B, D, H
from tests.reference.full import attention_per_query, real_pairs

TOL = {"atol": 1e-9, "rtol": 1e-7}


class GaussianBiasAttention(BiasedAttention):
    """``score_ij + -dist_ij^2 / (2 sigma_h^2)``, a learned sigma per head; unreachable pairs count as
    ``far`` hops. What a user writes: ``__init__``, ``bias`` and (to be reported) ``learned_quantities``."""

    requires = frozenset({"distance"})

    def __init__(self, num_heads: int, head_dim: int, sigma: float = 1.5, far: int = 8, backend: str = "sdpa"):
        super().__init__(num_heads, head_dim)
        self.backend = self.check_backend(backend)
        self.far = far
        self.log_sigma = nn.Parameter(torch.full((num_heads,), math.log(sigma)))

    def bias(self, structure: Structure, batch_size: int, num_heads: int, device: torch.device, dtype: torch.dtype):
        dist = structure.dense_distance().to(device).expand(batch_size, -1, -1)
        hops = torch.where(dist < 0, self.far, dist).to(dtype)[:, None]  # (b, 1, n, n)
        sigma = self.log_sigma.exp().to(dtype)[None, :, None, None]  # (1, h, 1, 1)
        return -hops.square() / (2 * sigma.square())  # (b, h, n, n)

    def learned_quantities(self) -> list[LearnedQuantity]:
        return [LearnedQuantity("sigma", self.log_sigma.detach().exp()[:, None], ["sigma"])]


@pytest.fixture
def gaussian():
    """Registered for one test only (the registry-wide suites stay on the built-in variants)."""
    register_attention("my_gaussian_bias")(GaussianBiasAttention)
    yield
    ATTENTION.unregister("my_gaussian_bias")


def gaussian_reference(module, q, k, v, distance, token_mask):
    """Pair by pair in float64: ``bias_hij = -d_ij^2 / (2 sigma_h^2)`` (``d = far`` when unreachable)."""
    b, h, n, _ = q.shape
    sigma = module.log_sigma.double().exp()
    rows = []
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                for j in range(n):
                    d = int(distance[bi, i, j])
                    d = module.far if d < 0 else d
                    rows.append(-(d**2) / (2 * sigma[hi] ** 2))
    bias = torch.stack(rows).reshape(b, h, n, n)
    return attention_per_query(q, k, v, real_pairs(token_mask, h), bias)


@pytest.mark.parametrize("backend", ["sdpa", "naive"])
def test_user_variant_matches_its_reference(gaussian, backend, generator):
    module = get_attention("my_gaussian_bias", num_heads=H, head_dim=D, backend=backend).double()
    with torch.no_grad():
        module.log_sigma.copy_(torch.tensor([0.1, 0.5, -0.3], dtype=torch.float64))
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator)
    out, weights = module(q, k, v, structure, return_weights=True)
    fast = module(q, k, v, structure)
    want, want_weights = gaussian_reference(module, q, k, v, structure.distance, structure.token_mask)
    torch.testing.assert_close(out, want, **TOL)
    torch.testing.assert_close(fast, want, **TOL)
    torch.testing.assert_close(weights, want_weights, **TOL)
    leaves = [q, k, v, module.log_sigma]
    probe = torch.randn(fast.shape, generator=generator, dtype=torch.float64)
    got = torch.autograd.grad((fast * probe).sum(), leaves)
    for label, g, w in zip("q k v sigma".split(), got, torch.autograd.grad((want * probe).sum(), leaves)):
        torch.testing.assert_close(g, w, **TOL, msg=lambda m, label=label: f"gradient of {label}: {m}")
    assert got[3].abs().min() > 0, "every head's sigma must get a gradient"


@pytest.mark.parametrize("garbage", [math.nan, math.inf, 1e30], ids=["nan", "inf", "1e30"])
def test_user_variant_ignores_padding_garbage(gaussian, garbage, generator):
    module = get_attention("my_gaussian_bias", num_heads=H, head_dim=D).double()
    structure = dependency_structure([7, 4], generator)
    mask = structure.token_mask
    clean = [fill_padding(x.detach(), mask, 0.0, 2).requires_grad_() for x in random_qkv(B, H, 7, D, generator)]
    dirty = [fill_padding(x.detach(), mask, garbage, 2).requires_grad_() for x in clean]
    got, want = module(*dirty, structure), module(*clean, structure)
    torch.testing.assert_close(got, want, **TOL)
    assert torch.all(got[~mask[:, None, :, None].expand_as(got)] == 0)
    grads = torch.autograd.grad(got.sum(), [*dirty, module.log_sigma])
    want_grads = torch.autograd.grad(want.sum(), [*clean, module.log_sigma])
    for g, w in zip(grads, want_grads):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g, w, **TOL)


def test_user_variant_sigma_is_reported_to_encoder_and_records(gaussian):
    from structattn.experiments.inspect import bias_records
    from tests.encoders.util import make_batch, random_sentence, tiny_encoder

    encoder = tiny_encoder("my_gaussian_bias(dependency)*2 + soft_bias(dependency)")
    module = encoder.layers[0].attention.variants[0]
    with torch.no_grad():
        module.log_sigma.copy_(torch.tensor([0.0, math.log(2.0)]))
    quantities = encoder.layers[0].attention.learned_quantities()
    (sigma,) = quantities["0:my_gaussian_bias(dependency)"]
    assert sigma.name == "sigma" and sigma.labels == ["sigma"] and sigma.learned
    torch.testing.assert_close(sigma.values, torch.tensor([[1.0], [2.0]]))
    assert [q.name for q in quantities["1:soft_bias(dependency)"]] == ["bias"]
    rng = random.Random(0)
    batch = make_batch([random_sentence(n, rng, sid=f"s{n}") for n in (6, 3)])
    out = encoder(batch.input_ids, batch.token_mask, batch.structures)
    assert torch.isfinite(out.hidden).all()

    class Model:  # bias_records reads model.encoder only
        pass

    model = Model()
    model.encoder = encoder
    records = [r for r in bias_records(model) if r["name"] == "sigma"]
    assert len(records) == len(encoder.layers)
    assert records[0]["labels"] == ["sigma"] and [v for (v,) in records[0]["values"]] == pytest.approx([1.0, 2.0])


def test_user_variant_composes_with_ssan(gaussian):
    """Any bias-only BiasedAttention can be ssan's structure bias; ssan then reports its sigma."""
    module = get_attention("ssan", num_heads=H, head_dim=D, structure_bias="my_gaussian_bias", generator=1)
    assert module.requires == {"distance"}
    assert [q.name for q in module.learned_quantities()] == ["sigma"]
    with pytest.raises(ValueError, match="only additive biases compose"):
        get_attention("ssan", num_heads=H, head_dim=D, structure_bias="hard_mask")


def test_builtin_learned_quantities():
    soft = get_attention("soft_bias", num_heads=H, head_dim=D, per_head=True, learnable_scale=True)
    with torch.no_grad():
        soft.table.uniform_(-1, 1)
        soft.scale.fill_(3.0)
    (table,) = soft.learned_quantities()
    assert table.name == "bias" and table.labels == soft.bucket_labels()
    torch.testing.assert_close(table.values, 3.0 * soft.table.detach())
    shared = get_attention("soft_bias", num_heads=H, head_dim=D).learned_quantities()[0]
    assert shared.values.shape == (1, len(shared.labels))
    ssan = get_attention("ssan", num_heads=H, head_dim=D, structure_bias="soft_bias")
    assert [q.labels for q in ssan.learned_quantities()] == [ssan.structure_bias.bucket_labels()]
    for name in ("full", "fixed_decay", "hard_mask", "local_global"):
        assert get_attention(name, num_heads=H, head_dim=D).learned_quantities() == []
    assert get_attention("ssan", num_heads=H, head_dim=D).learned_quantities() == []
    with pytest.raises(ValueError, match="labels"):
        LearnedQuantity("bias", torch.zeros(2, 3), ["a", "b"])


def test_user_variant_flex_cpu_inference(gaussian, generator):
    """The dense-bias FlexAttention path (compiled for CPU, inference only; ~10 s)."""
    flex = get_attention("my_gaussian_bias", num_heads=H, head_dim=D, backend="flex")
    fast = get_attention("my_gaussian_bias", num_heads=H, head_dim=D)
    fast.load_state_dict(flex.state_dict())
    structure = dependency_structure([6, 4], generator, forests=True)
    q, k, v = (x.detach() for x in random_qkv(B, H, 6, D, generator, torch.float32))
    with pytest.raises(ValueError, match="no CPU backward"):
        flex(q, k, v, structure)  # log_sigma requires grad
    with torch.no_grad():
        torch.testing.assert_close(flex(q, k, v, structure), fast(q, k, v, structure), atol=1e-5, rtol=1e-5)
