"""The attention contract as reusable checks (the way ``torch_geometric.testing`` serves PyG layers).

``check_attention("my_variant", my_reference)`` builds the registered variant with b=2, h=3, n=7, d=5 and runs
every check of :data:`ATTENTION_CHECKS`; the first failure raises ``AssertionError`` naming the check and
the size of the mismatch. Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.

The oracle ``reference(q, k, v, structure, module)`` (``..., module, hidden)`` for variants with
``needs_hidden``) is a float64 function that shares no code with the variant and returns ``out (b, h, n, d)``
or ``(out, weights (b, h, n, n))``. It is called right after the module, in the same mode, so a
stochastic variant can replay its last draw.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from structattn.attention import StructuredAttention, get_attention
from structattn.structures import FIELDS, Structure
from structattn.testing._checks import Skipped, expect, run_checks
from structattn.testing.inputs import B, D, H, LENGTHS, N, dependency_structure, fill_padding, pad_structure, random_qkv

Reference = Callable[..., Any]
StructureFactory = Callable[[list[int], torch.Generator], Structure]


@dataclass
class AttentionCase:
    """What the checks need to know about one variant.

    Attributes:
        name: registry name.
        reference: the float64 oracle (see the module docstring).
        make: ``make(num_heads, head_dim) -> module``; default ``get_attention(name, ..., **options)``.
        structure_factory: ``(lengths, generator) -> batched Structure``; default random dependency trees.
        needs_hidden: pass the layer input ``hidden (b, n, h * d)``; default the variant's ``needs_hidden``.
        atol, rtol: tolerances of the float64 comparisons.
        seed: seeds the generator of every check.
    """

    name: str
    reference: Reference
    make: Callable[[int, int], StructuredAttention] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    structure_factory: StructureFactory = dependency_structure
    needs_hidden: bool | None = None
    atol: float = 1e-9
    rtol: float = 1e-7
    seed: int = 20240531

    def build(self) -> StructuredAttention:
        """The variant's module, its parameters drawn from ``seed`` (so a check gives the same answer whatever
        ran before it in the process; the global random state is left as it was)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            module = self.make(H, D) if self.make else get_attention(self.name, num_heads=H, head_dim=D,
                                                                      **self.options)
        expect(isinstance(module, StructuredAttention),
               f"{self.name!r} built a {type(module).__name__}, not a StructuredAttention")
        return module

    def hidden_needed(self, module: StructuredAttention) -> bool:
        return bool(type(module).needs_hidden) if self.needs_hidden is None else self.needs_hidden

    def generator(self) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed)

    def inputs(self, module: StructuredAttention, generator: torch.Generator, dtype: torch.dtype = torch.float64,
               lengths: tuple[int, ...] = LENGTHS) -> tuple[Structure, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        structure = self.structure_factory(list(lengths), generator)
        q, k, v = random_qkv(B, H, structure.num_tokens, D, generator, dtype)
        hidden = None
        if self.hidden_needed(module):
            hidden = torch.randn(B, structure.num_tokens, H * D, generator=generator, dtype=dtype).requires_grad_()
        return structure, q, k, v, hidden

    def oracle(self, module, q, k, v, structure, hidden) -> tuple[torch.Tensor, torch.Tensor | None]:
        args = (q, k, v, structure, module) + ((hidden,) if self.hidden_needed(module) else ())
        got = self.reference(*args)
        return (got[0], got[1]) if isinstance(got, tuple) else (got, None)


def call(module, q, k, v, structure, hidden, **kwargs):
    return module(q, k, v, structure, hidden=hidden, **kwargs)


def close(got: torch.Tensor, want: torch.Tensor, what: str, atol: float, rtol: float) -> None:
    """``torch.testing.assert_close`` with a message that names ``what`` and the largest difference."""
    try:
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
    except AssertionError as err:
        diff = (got.detach().double() - want.detach().double()).abs()
        worst = diff.nan_to_num(float("inf")).argmax()
        where = tuple(int(i) for i in torch.unravel_index(worst, diff.shape)) if diff.numel() else ()
        raise AssertionError(f"{what}: largest difference {float(diff.flatten()[worst]):.3g} at index {where} "
                             f"(atol={atol}, rtol={rtol}); {str(err).splitlines()[0]}") from None


def close_output(got: torch.Tensor, want: torch.Tensor, structure: Structure, what: str, atol: float,
                 rtol: float) -> None:
    """:func:`close` for ``(b, h, n, d)`` outputs; when they agree on real tokens and differ only on padded
    query rows, the message says so (the module zeroes padded query rows: the oracle must zero them too)."""
    try:
        close(got, want, what, atol, rtol)
    except AssertionError as whole:
        real = structure.token_mask[:, None, :, None].expand_as(got)
        if not torch.allclose(got[real], want[real], atol=atol, rtol=rtol):
            raise whole from None
        raise AssertionError(f"{what}: equal on real tokens but not on padded query rows: the module zeroes padded "
                             "query rows (token_mask False), so the oracle must return zeros there too "
                             "(out = out * token_mask[:, None, :, None])") from None


def check_output_shape(case: AttentionCase) -> None:
    module, gen = case.build(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen, torch.float32)
    out, weights = call(module, q, k, v, structure, hidden, return_weights=True)
    expect(out.shape == (B, H, N, D) and out.dtype == torch.float32, f"output {tuple(out.shape)} {out.dtype}, expected {(B, H, N, D)} float32")
    expect(weights.shape == (B, H, N, N), f"weights have shape {tuple(weights.shape)}, expected {(B, H, N, N)}")


def check_reference(case: AttentionCase) -> None:
    """Outputs, weights (when the oracle returns them) and gradients of q, k, v, hidden and every parameter."""
    module, gen = case.build().double().train(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen)
    out = call(module, q, k, v, structure, hidden)
    want, _ = case.oracle(module, q, k, v, structure, hidden)
    close_output(out, want, structure, "output vs reference", case.atol, case.rtol)
    grad_out = torch.randn(out.shape, generator=gen, dtype=out.dtype)
    named = {"q": q, "k": k, "v": v, **({"hidden": hidden} if hidden is not None else {})}
    named.update({f"parameter {n}": p for n, p in module.named_parameters() if p.requires_grad})
    got = torch.autograd.grad(out, list(named.values()), grad_out, allow_unused=True)
    ref = torch.autograd.grad(want, list(named.values()), grad_out, allow_unused=True)
    for label, g, w in zip(named, got, ref):
        zero = torch.zeros_like(named[label])
        close(zero if g is None else g, zero if w is None else w, f"gradient of {label} vs reference", case.atol, case.rtol)
    out, weights = call(module, q, k, v, structure, hidden, return_weights=True)
    want, want_weights = case.oracle(module, q, k, v, structure, hidden)
    close_output(out, want, structure, "output (return_weights=True) vs reference", case.atol, case.rtol)
    if want_weights is not None:
        close(weights, want_weights, "weights vs reference", case.atol, case.rtol)


def _padded_run(case, module, structure, q, k, v, hidden, value: float):
    """Output with ``value`` in the padded positions of the batch and in 3 extra padded tokens."""
    padded = pad_structure(structure, 3)
    mask = padded.token_mask

    def extend(x: torch.Tensor, dim: int) -> torch.Tensor:
        shape = list(x.shape)
        shape[dim] = 3
        return fill_padding(torch.cat([x, torch.zeros(shape, dtype=x.dtype)], dim), mask, value, dim)

    return call(module, extend(q, 2), extend(k, 2), extend(v, 2), padded, None if hidden is None else extend(hidden, 1))


def _check_padding(case: AttentionCase, value: float, what: str) -> None:
    module, gen = case.build().double().eval(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen)
    mask = structure.token_mask
    base = call(module, *(fill_padding(x, mask, -3e3, 2) for x in (q, k, v)), structure,
                None if hidden is None else fill_padding(hidden, mask, -3e3, 1))
    out = _padded_run(case, module, structure, q, k, v, hidden, value)
    real = mask[:, None, :, None].expand_as(base)
    close(out[:, :, :N][real], base[real], f"real-token outputs with {what} in the padding vs another padding",
          case.atol, case.rtol)
    padded_rows = torch.cat([out[:, :, :N][~real], out[:, :, N:].flatten()]).detach()
    if not bool(torch.all(padded_rows == 0)):
        worst = float(padded_rows.abs().nan_to_num(float("inf")).max())
        raise AssertionError(f"padded query rows must be zero; with {what} in the padding the largest is {worst:.3g}")


def check_padding_invariance(case: AttentionCase) -> None:
    """Large finite garbage (1e4) in padded q, k, v, hidden: real outputs unchanged, padded rows zero."""
    _check_padding(case, 1e4, "large finite garbage (1e4)")


def check_nan_padding(case: AttentionCase) -> None:
    """NaN in the padded positions: nothing leaks (padding must be zeroed, not multiplied by 0)."""
    _check_padding(case, float("nan"), "NaN")


def check_rows_without_allowed_keys(case: AttentionCase) -> None:
    """A one-token sentence beside a full one, and a structure where nothing is reachable: finite outputs
    and gradients, zero output where a row attended to nothing."""
    module, gen = case.build().train(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen, torch.float32, lengths=(N, 1))
    variants = [structure]
    if structure.distance is not None:
        adjacency = None if structure.adjacency is None else torch.zeros_like(structure.adjacency)
        variants.append(replace(structure, distance=torch.full_like(structure.distance, -1), adjacency=adjacency))
    for s in variants:
        out, weights = call(module, q, k, v, s, hidden, return_weights=True)
        expect(bool(torch.isfinite(out).all() and torch.isfinite(weights).all()), "non-finite output or weights")
        grads = torch.autograd.grad(call(module, q, k, v, s, hidden).sum(), [q, k, v])
        expect(all(bool(torch.isfinite(g).all()) for g in grads), "non-finite gradient of q, k or v")
        empty = weights.sum(-1) == 0  # (b, h, n)
        expect(bool(torch.all(out[empty] == 0)), "a row with no allowed key must output zeros")
        expect(bool(torch.all(out[1, :, 1:] == 0)), "padded query rows must be zero")


def check_permutation_equivariance(case: AttentionCase) -> None:
    """Permuting tokens and structure together permutes the output (not for position-based structures)."""
    module, gen = case.build().double().eval(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen)
    if structure.window_radius is not None:
        raise Skipped("position-based (window) structure: not permutation-equivariant; "
                      "check_reversal_equivariance covers it")
    perm = torch.randperm(N, generator=gen)
    out = call(module, q, k, v, structure, hidden)
    out_p = call(module, q[:, :, perm], k[:, :, perm], v[:, :, perm], structure.permute(perm),
                 None if hidden is None else hidden[:, perm])
    close(out_p, out[:, :, perm], f"output on tokens permuted by {perm.tolist()} vs permuted output", case.atol, case.rtol)


def check_reversal_equivariance(case: AttentionCase) -> None:
    """Window structures: reversing the tokens (and the padding) reverses the output."""
    module, gen = case.build().double().eval(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen)
    if structure.window_radius is None:
        raise Skipped("not a position-based structure: check_permutation_equivariance covers it")
    flip = {"token_mask": structure.token_mask.flip(-1)}
    if structure.is_global is not None:
        flip["is_global"] = structure.is_global.flip(-1)
    out = call(module, q, k, v, structure, hidden)
    out_r = call(module, q.flip(2), k.flip(2), v.flip(2), replace(structure, **flip), None if hidden is None else hidden.flip(1))
    close(out_r, out.flip(2), "output on reversed tokens vs reversed output", case.atol, case.rtol)


def check_eval_determinism(case: AttentionCase) -> None:
    module, gen = case.build().eval(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen, torch.float32)
    a, b = (call(module, q, k, v, structure, hidden).detach() for _ in range(2))
    if not torch.equal(a, b):
        raise AssertionError(f"two eval calls differ by up to {float((a - b).abs().max()):.3g}")


def check_parameter_gradients(case: AttentionCase) -> None:
    module, gen = case.build().train(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen, torch.float32)
    out = call(module, q, k, v, structure, hidden)
    (out * torch.randn(out.shape, generator=gen)).sum().backward()
    for label, p in module.named_parameters():
        expect(p.grad is not None, f"parameter {label} got no gradient")
        expect(bool(torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0), f"parameter {label}: gradient {p.grad}")


def check_missing_fields_at_build(case: AttentionCase) -> None:
    cls = type(case.build())
    cls.check_fields(set(FIELDS))
    for name in cls.requires:
        try:
            cls.check_fields(set(FIELDS) - {name})
        except ValueError as err:
            expect(name in str(err), f"the build-time error for missing {name!r} does not name it: {err}")
        else:
            raise AssertionError(f"check_fields accepted a structure without required field {name!r}")


def check_missing_fields_at_call(case: AttentionCase) -> None:
    module, gen = case.build(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen, torch.float32)
    bare = Structure(token_mask=structure.token_mask)
    missing = sorted(set(module.requires) - bare.fields())
    if not missing:
        try:
            out = call(module, q, k, v, bare, hidden)
        except Exception as err:  # noqa: BLE001  (any failure here means a field read but not declared)
            raise AssertionError(
                f"missing_fields_at_call: with a structure of token_mask only, the variant failed "
                f"({type(err).__name__}: {err}); it reads a field it does not list in `requires`: declare it "
                "(e.g. requires = frozenset({'distance'})) so that models are checked when they are built") from None
        expect(out.shape == q.shape, "a bare structure changed the output shape")
        return
    try:
        call(module, q, k, v, bare, hidden)
    except ValueError as err:
        expect(any(m in str(err) for m in missing), f"the call-time error does not name {missing}: {err}")
    else:
        raise AssertionError(f"a structure without {missing} was accepted at call time (silently ignored mask?)")


def check_weights_rows(case: AttentionCase) -> None:
    """Weight rows of real queries sum to 1; padded queries and padded keys get no weight."""
    module, gen = case.build().double().eval(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen)
    _, weights = call(module, q, k, v, structure, hidden, return_weights=True)
    sums = weights.sum(-1)  # (b, h, n)
    real = structure.token_mask[:, None, :].expand_as(sums)
    close(sums[real], torch.ones_like(sums[real]), "weight row sums of real queries vs 1", case.atol, case.rtol)
    expect(bool(torch.all(sums[~real] == 0)), "padded query rows must have all-zero weights")
    leaked = weights.transpose(-1, -2)[~real].detach()
    expect(bool(torch.all(leaked == 0)), f"padded keys must get no weight; the largest is {float(leaked.abs().max()):.3g}")


def check_half_precision(case: AttentionCase) -> None:
    """A bf16 module on bf16 inputs returns bf16, close to the float64 run of the same rounded values."""
    module, gen = case.build().eval().to(torch.bfloat16), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen, torch.bfloat16)
    inputs = [x.detach() for x in (q, k, v)] + [None if hidden is None else hidden.detach()]
    out = call(module, *inputs[:3], structure, inputs[3])
    expect(out.dtype == torch.bfloat16, f"bf16 inputs gave a {out.dtype} output")
    wide = [None if x is None else x.double() for x in inputs]
    want = call(copy.deepcopy(module).double(), *wide[:3], structure, wide[3])
    close(out.double(), want, "bf16 output vs float64 run", 3e-2, 3e-2)


#: relative (Frobenius) error allowed between training's bf16 path and the float64 oracle, for the output and
#: for every gradient: about five bfloat16 unit roundoffs (2 ** -8); the shipped variants measure 1.6e-3 to
#: 4.2e-3 (b=2, h=3, n=7, d=5).
BF16_RELATIVE_ERROR = 2e-2


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().double(), want.detach().double()
    return float((got - want).norm() / want.norm().clamp_min(1e-300))


def check_bf16_autocast(case: AttentionCase) -> None:
    """Training's bf16 path (``training.precision = 'bf16'``): the float32 module under bfloat16 autocast, on
    bf16 inputs, against the float64 oracle on the same rounded inputs (a float64 copy of the module): the
    output and the gradients of q, k, v, hidden and every parameter within :data:`BF16_RELATIVE_ERROR`. In eval
    mode: a stochastic variant's training draw is made in float32, which a float64 oracle cannot replay, and a
    hard selection may flip under rounding (its training path is checked in float64 by ``reference``)."""
    module, gen = case.build().eval(), case.generator()
    structure, q, k, v, hidden = case.inputs(module, gen)
    rounded = [None if x is None else x.detach().to(torch.bfloat16) for x in (q, k, v, hidden)]
    low = [None if x is None else x.clone().requires_grad_() for x in rounded]
    with torch.autocast(q.device.type, dtype=torch.bfloat16):
        out = call(module, *low[:3], structure, low[3])
    expect(out.dtype == torch.bfloat16, f"under bf16 autocast the output is {out.dtype}, expected bfloat16")
    wide_module = copy.deepcopy(module).double()
    wide = [None if x is None else x.detach().double().requires_grad_() for x in rounded]
    want, _ = case.oracle(wide_module, *wide[:3], structure, wide[3])
    error = _relative_error(out, want)
    expect(error <= BF16_RELATIVE_ERROR, f"bf16 output vs float64 reference: relative error {error:.3g} "
                                         f"> {BF16_RELATIVE_ERROR}")
    grad_out = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    pairs = {"q": (low[0], wide[0]), "k": (low[1], wide[1]), "v": (low[2], wide[2])}
    if low[3] is not None:
        pairs["hidden"] = (low[3], wide[3])
    wide_params = dict(wide_module.named_parameters())
    pairs.update({f"parameter {n}": (p, wide_params[n]) for n, p in module.named_parameters() if p.requires_grad})
    got = torch.autograd.grad(out, [a for a, _ in pairs.values()], grad_out.to(out.dtype), allow_unused=True)
    ref = torch.autograd.grad(want, [b for _, b in pairs.values()], grad_out, allow_unused=True)
    for label, g, w in zip(pairs, got, ref):
        if g is None and w is None:
            continue
        expect(g is not None and w is not None, f"gradient of {label}: "
               + ("the bf16 path gives none, the reference does" if g is None else "the reference gives none"))
        error = _relative_error(g, w)
        expect(error <= BF16_RELATIVE_ERROR, f"bf16 gradient of {label} vs float64 reference: relative error "
                                             f"{error:.3g} > {BF16_RELATIVE_ERROR}")


#: every attention check by name, in the order ``check_attention`` runs them
ATTENTION_CHECKS: dict[str, Callable[[AttentionCase], None]] = {
    "output_shape": check_output_shape,
    "reference": check_reference,
    "padding_invariance": check_padding_invariance,
    "nan_padding": check_nan_padding,
    "rows_without_allowed_keys": check_rows_without_allowed_keys,
    "permutation_equivariance": check_permutation_equivariance,
    "reversal_equivariance": check_reversal_equivariance,
    "eval_determinism": check_eval_determinism,
    "parameter_gradients": check_parameter_gradients,
    "missing_fields_at_build": check_missing_fields_at_build,
    "missing_fields_at_call": check_missing_fields_at_call,
    "weights_rows": check_weights_rows,
    "half_precision": check_half_precision,
    "bf16_autocast": check_bf16_autocast,
}


def check_attention(
    name: str,
    reference: Reference,
    *,
    make: Callable[[int, int], StructuredAttention] | None = None,
    options: dict[str, Any] | None = None,
    structure_factory: StructureFactory | None = None,
    needs_hidden: bool | None = None,
    atol: float = 1e-9,
    rtol: float = 1e-7,
    checks: list[str] | None = None,
) -> dict[str, str]:
    """Run the attention contract on the registered variant ``name``.

    Args:
        name: the variant's registry name (register it first: import your plugin).
        reference: float64 oracle ``(q, k, v, structure, module[, hidden]) -> out or (out, weights)``.
        make: ``make(num_heads, head_dim) -> module`` when the module needs more than options (e.g. set
            a table to random values); by default ``get_attention(name, num_heads=3, head_dim=5, **options)``.
        options: constructor options for the default ``make``.
        structure_factory: ``(lengths, generator) -> batched Structure``; default random trees through the
            real ``dependency`` provider.
        needs_hidden: pass ``hidden (b, n, h * d)`` to the module and the oracle (default: the variant's).
        atol, rtol: tolerances of the float64 comparisons.
        checks: names from :data:`ATTENTION_CHECKS` to run (default all).

    Returns:
        ``{check: "passed" | "skipped: REASON"}`` (skips are also printed).

    Raises:
        AssertionError: naming the failed check and the size of the mismatch.
    """
    case = AttentionCase(name, reference, make, dict(options or {}), structure_factory or dependency_structure,
                         needs_hidden, atol, rtol)
    selected = {c: ATTENTION_CHECKS[c] for c in (checks or ATTENTION_CHECKS)}
    return run_checks("attention", name, {c: (lambda f=f: f(case)) for c, f in selected.items()})
