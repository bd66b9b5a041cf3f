"""Contract-test case for ``soft_bias``: shared table with a learnable scale, random non-zero table values,
forests so that the unreachable bucket is used."""

from __future__ import annotations

import torch

from structattn.attention import StructuredAttention, get_attention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure
from tests.reference.soft_bias import soft_bias_reference


def make(num_heads: int, head_dim: int, **options) -> StructuredAttention:
    options = {"max_distance": 3, "learnable_scale": True, **options}
    module = get_attention("soft_bias", num_heads=num_heads, head_dim=head_dim, **options)
    generator = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        module.table.copy_(torch.randn(module.table.shape, generator=generator))
        if module.scale is not None:
            module.scale.fill_(1.5)
    return module


def make_structure(lengths: list[int], generator: torch.Generator) -> Structure:
    return dependency_structure(lengths, generator, forests=True)


def reference(q, k, v, structure, module, hidden=None):
    return soft_bias_reference(module, q, k, v, structure.distance, structure.token_mask)


#: Tolerance of the float64 kernels against the float64 oracle.
ORACLE_TOL = {"atol": 1e-9, "rtol": 1e-7}


def assert_matches_oracle(module, q, k, v, structure: Structure, generator: torch.Generator) -> None:
    """``module``'s output and its gradients (q, k, v, table, scale) for a random ``dO`` equal the float64
    oracle's (the kernel runs under the caller's thread and block settings)."""
    out = module(q, k, v, structure)
    want, _ = soft_bias_reference(module, q, k, v, structure.distance, structure.token_mask)
    torch.testing.assert_close(out, want, **ORACLE_TOL)
    leaves = [q, k, v, module.table, module.scale]
    grad_out = torch.randn(out.shape, generator=generator, dtype=out.dtype)
    for got, ref in zip(torch.autograd.grad(out, leaves, grad_out), torch.autograd.grad(want, leaves, grad_out)):
        torch.testing.assert_close(got, ref, **ORACLE_TOL)
