"""The attention contract shared by every variant.

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim. Layout is always ``b h n d``.

Call signature (the same for all variants)::

    out = module(q, k, v, structure)                                  # (b, h, n, d)
    out, weights = module(q, k, v, structure, return_weights=True)    # weights (b, h, n, n)
    out = module(q, k, v, structure, hidden=x)                        # x: the layer input (b, n, d_model)

``hidden`` is the one documented extension of the call: variants that score pairs from the layer input
(``ssan``) declare ``needs_hidden = True`` and fail without it; the others ignore it. ``structure`` may be
``None`` only for variants that require no structure field (no padding is assumed then).

Padding is handled here, once, for every variant: padded rows of q, k, v (and of ``hidden``, for variants
that read it) are replaced with zeros before the variant runs (``torch.where``, so NaN or inf left there by
the caller cannot leak: ``0 * NaN`` would be NaN) unless they are already harmless (on CPU, finite and at most
:data:`HARMLESS_PADDING` in size, see :func:`blank_inputs`), and padded query rows of the output and the
weights are zeroed after it. A variant only has to keep padded keys out of every real row's softmax (a masked
score's weight is then exactly 0) and must not read padded rows otherwise (they may hold such small values). Padded keys never
receive weight. A query row with no allowed key yields a zero vector (and an all-zero weight row), never NaN.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from structattn.attention.learned import LearnedQuantity
from structattn.registry import Registry
from structattn.structures.structure import Structure

#: the variant registry; the built-in variants register on first lookup (:mod:`structattn.attention.builtin`)
ATTENTION: Registry["StructuredAttention"] = Registry("attention variant", builtin="structattn.attention.builtin")
register_attention = ATTENTION.register


def get_attention(name: str, **options: object) -> "StructuredAttention":
    """Build the variant registered as ``name`` with its own ``options`` (a bad option: ``ValueError`` naming it).
    Every variant's constructor takes ``(num_heads, head_dim, **options)``."""
    return ATTENTION.build(name, **options)


def attention_names() -> list[str]:
    """Names of every registered variant."""
    return ATTENTION.names()


class _instance_or_class_method:
    """Descriptor: the wrapped function receives the instance when called on one, else the class."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)

    def __get__(self, obj: object, cls: type) -> Callable[..., Any]:
        return functools.partial(self.func, cls if obj is None else obj)


class StructuredAttention(nn.Module):
    """Base class: validates inputs and the structure, then calls :meth:`attend`.

    Args:
        num_heads: h.
        head_dim: d.

    Class attributes:
        requires: structure fields the variant reads (see ``structattn.structures.structure.FIELDS``).
        needs_hidden: whether the variant needs the layer input ``hidden``.
        value_size_may_differ: whether ``v`` may have another head size than ``q`` and ``k`` (``(b, h, n, e)``,
            giving an output ``(b, h, n, e)``). Off by default: the contract is one ``d`` for q, k and v, and
            a variant whose kernels need it (fused bias tables, banded windows) gets a clear error here
            instead of a shape error deep inside; a variant whose every path takes any ``e`` turns it on.
    """

    name: ClassVar[str]
    requires: ClassVar[frozenset[str]] = frozenset()
    needs_hidden: ClassVar[bool] = False
    value_size_may_differ: ClassVar[bool] = False

    def __init__(self, num_heads: int, head_dim: int) -> None:
        super().__init__()
        if num_heads < 1 or head_dim < 1:
            raise ValueError(f"num_heads and head_dim must be >= 1, got num_heads={num_heads}, head_dim={head_dim}")
        self.num_heads = num_heads
        self.head_dim = head_dim

    @_instance_or_class_method
    def check_fields(self_or_cls: Any, available: set[str] | frozenset[str], source: str = "the structure") -> None:
        """Build-time check: raise ``ValueError`` when ``available`` lacks a field the variant requires. On the
        class it checks the class's ``requires``; on a built module, the module's (options may add fields, e.g.
        ``ssan``'s ``structure_bias``)."""
        missing = sorted(set(self_or_cls.requires) - set(available))
        if missing:
            owner = self_or_cls if isinstance(self_or_cls, type) else type(self_or_cls)
            detail = "" if self_or_cls is owner else self_or_cls.field_detail()
            raise ValueError(
                f"attention variant {getattr(owner, 'name', owner.__name__)!r}{detail} needs structure field(s) "
                f"{missing}, but {source} provides only {sorted(available)}"
            )

    def learned_quantities(self) -> list[LearnedQuantity]:
        """What the variant learned, for results, plots and bias tables: a list of
        :class:`~structattn.attention.learned.LearnedQuantity` (name, values ``(h or 1, K)``, column labels).
        Default: nothing. Override it in a variant with parameters worth reporting (tables, scales, sigmas)."""
        return []

    def field_detail(self) -> str:
        """Hook: text after the variant's name in a missing-field error of a built module (default none)."""
        return ""

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        structure: Structure | None = None,
        *,
        hidden: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        self._check_inputs(q, k, v, structure, hidden)
        token_mask = padding_of(structure, q.shape[0], q.shape[2], q.device)
        if token_mask is not None:  # padded rows hold zeros or harmless values, whatever the caller left there
            q, k, v = (blank_inputs(x, token_mask, 2) for x in (q, k, v))
            if hidden is not None and self.needs_hidden:  # the other variants ignore hidden: no copy
                hidden = blank_inputs(hidden, token_mask, 1)
        out, weights = self.attend(q, k, v, structure, hidden=hidden, return_weights=return_weights)
        if token_mask is not None:  # padded queries are zeroed here, once, for every variant
            out = blank_padding(out, token_mask, 2)
            weights = None if weights is None else blank_padding(weights, token_mask, 2)
        if return_weights:
            if weights is None:
                raise RuntimeError(f"{self.name!r} did not return weights although asked to")
            return out, weights
        return out

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        structure: Structure | None,
        *,
        hidden: torch.Tensor | None,
        return_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Variant hook: ``(out (b, h, n, d), weights (b, h, n, n) or None)``."""
        raise NotImplementedError

    def _check_inputs(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        structure: Structure | None,
        hidden: torch.Tensor | None,
    ) -> None:
        who = f"attention {self.name!r}"
        _check_tensors(who, q=q, k=k, v=v, hidden=hidden)
        if structure is not None and not isinstance(structure, Structure):
            raise TypeError(f"{who}: structure must be a Structure (or None), got {type(structure).__name__}")
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.shape != k.shape or q.shape[:-1] != v.shape[:-1]:
            raise ValueError(
                f"{who}: q, k, v must be (b, h, n, d) with equal shapes, got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                f"v {tuple(v.shape)}"
            )
        if v.shape[-1] != q.shape[-1] and not self.value_size_may_differ:
            raise ValueError(
                f"{who}: v has head size {v.shape[-1]}, q and k have {q.shape[-1]} (q {tuple(q.shape)}, v "
                f"{tuple(v.shape)}); this variant needs one head size d for q, k and v"
            )
        dtypes = {"q": q.dtype, "k": k.dtype, "v": v.dtype}
        if not all(x.is_floating_point() for x in (q, k, v)) or len(set(dtypes.values())) > 1:
            shown = ", ".join(f"{name} {_dtype_name(dt)}" for name, dt in dtypes.items())
            raise ValueError(f"{who}: q, k, v must share one floating-point dtype, got {shown}")
        if hidden is not None and (hidden.dim() != 3 or not hidden.is_floating_point()):
            raise ValueError(
                f"{who}: hidden must be a floating-point (b, n, d_model) tensor, got hidden {tuple(hidden.shape)} "
                f"{_dtype_name(hidden.dtype)}"
            )
        b, h, n, _ = q.shape
        if h != self.num_heads:
            raise ValueError(f"{who}: built for {self.num_heads} heads, got q with {h}")
        if structure is None:
            if self.requires:
                raise ValueError(f"{who} needs a structure with {sorted(self.requires)}, got None")
        else:
            structure.require(self.requires, who)
            distance = structure.distance
            if distance is not None and (distance.is_floating_point() or distance.dtype == torch.bool):
                raise ValueError(
                    f"{who}: structure.distance must be an integer tensor (hops, -1 = unreachable), got "
                    f"{distance.dtype}"
                )
            lead = (b,) if structure.is_batched else ()
            if structure.num_tokens != n or (structure.is_batched and structure.token_mask.shape[0] != b):
                raise ValueError(
                    f"{who}: structure covers {tuple(structure.token_mask.shape)} tokens, q has b={b}, n={n}"
                    f" (is the structure batched with collate? lead shape {lead})"
                )
        if self.needs_hidden:
            if hidden is None:
                raise ValueError(f"{who} needs the layer input: call it with hidden=x, x of shape (b, n, d_model)")
            if hidden.shape[:2] != (b, n):
                raise ValueError(f"{who}: hidden has shape {tuple(hidden.shape)}, expected ({b}, {n}, d_model)")


def _check_tensors(who: str, **inputs: object) -> None:
    """``TypeError`` naming the first input that is neither a tensor nor (for ``hidden``) ``None``."""
    for name, x in inputs.items():
        if not isinstance(x, torch.Tensor) and not (name == "hidden" and x is None):
            shape = "(b, n, d_model)" if name == "hidden" else "(b, h, n, d)"
            raise TypeError(f"{who}: {name} must be a torch.Tensor {shape}, got {type(x).__name__}")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def key_padding(structure: Structure | None, b: int, n: int, device: torch.device) -> torch.Tensor:
    """``token_mask`` as ``(b, n)`` bool (all True without a structure)."""
    if structure is None or structure.token_mask is None:
        return torch.ones(b, n, dtype=torch.bool, device=device)
    mask = structure.token_mask.to(device)
    return mask.expand(b, n) if mask.dim() == 1 else mask


def padding_of(structure: Structure | None, b: int, n: int, device: torch.device) -> torch.Tensor | None:
    """``token_mask`` as ``(b, n)`` bool, or ``None`` when nothing is padded (decided on CPU only, to avoid
    a device sync elsewhere)."""
    if structure is None or structure.token_mask is None:
        return None
    mask = key_padding(structure, b, n, device)
    if mask.device.type == "cpu" and bool(mask.all()):
        return None
    return mask


#: Padded input entries no larger than this (in absolute value) are left in place on CPU, see :func:`blank_inputs`.
HARMLESS_PADDING = 1e6


def blank_inputs(x: torch.Tensor, token_mask: torch.Tensor, token_dim: int) -> torch.Tensor:
    """:func:`blank_padding` for an input (q, k, v, hidden), skipped when its padded entries cannot matter.

    Skipped on CPU for float32/float64 inputs whose padded entries are all finite with ``|x| <=``
    :data:`HARMLESS_PADDING` (checked on the padded rows alone, a small gather): a score against a padded key
    is then at most ``d * 1e12`` in size beside the ``-3.4e38`` mask, so its weight is exactly 0, as with zeros;
    padded values are multiplied by that exact 0; padded queries only feed their own rows, which are zeroed
    after the variant (and whose gradient is zero). Gradients at padded positions stay exactly zero. NaN, inf
    or large values are replaced by zeros as before. Other devices (no host sync) and half dtypes always blank.
    What it saves: on a 2-sentence, 512-token BERT batch the ``where`` copies and their backward were 3-4%
    of a training step.
    """
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        padded = x.detach().movedim(token_dim, 1)[~token_mask]  # (padded tokens, ...)
        if padded.numel() == 0 or bool(padded.abs().max() <= HARMLESS_PADDING):  # NaN compares False
            return x
    return blank_padding(x, token_mask, token_dim)


def blank_padding(x: torch.Tensor, token_mask: torch.Tensor, token_dim: int) -> torch.Tensor:
    """``x`` with zeros at the padded positions along ``token_dim`` (``torch.where``: NaN-proof).

    Shapes:
        x ``(b, ..., n, ...)`` with n at ``token_dim``; token_mask ``(b, n)``.
    """
    shape = [1] * x.dim()
    shape[0], shape[token_dim] = token_mask.shape
    return torch.where(token_mask.view(shape), x, torch.zeros((), dtype=x.dtype, device=x.device))
