"""The attention function structattn registers in ``transformers.AttentionInterface``.

``attach`` sets ``config._attn_implementation`` to ``"structattn_<base>"`` (base: the model's ``sdpa`` or
``eager``). The registered function dispatches on the layer module it receives: a layer with an attached
:class:`~structattn.hf.attached.AttachedAttention` runs the structattn variants; every other layer calls
the base implementation unchanged (``ALL_ATTENTION_FUNCTIONS[base]``, or the family's own
``eager_attention_forward``). The same name is registered in ``AttentionMaskInterface`` with the base's mask
function, so full layers receive exactly the mask they would have received (a registered attention without
a mask function would silently drop the padding).

Glossary: b batch, h heads, n tokens (i queries, j keys), d head dim.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from typing import Any, Callable, Iterator, Mapping

import torch
from torch import nn

from structattn.structures.structure import Structure

PREFIX = "structattn_"
BASES = ("sdpa", "eager")

_ACTIVE: contextvars.ContextVar[Mapping[str, Structure] | None] = contextvars.ContextVar("structattn_hf", default=None)


def implementation_name(base: str) -> str:
    """The registered name routing to structattn over ``base`` (``"sdpa"`` -> ``"structattn_sdpa"``)."""
    if base not in BASES:
        raise ValueError(
            f"structattn.hf supports models whose attention implementation is one of {list(BASES)}, got {base!r}; "
            "call model.set_attn_implementation('sdpa') first"
        )
    return PREFIX + base


def base_of(name: str | None) -> str:
    """The base implementation behind ``name`` (itself when it is not a structattn name; ``None`` -> sdpa)."""
    name = name or "sdpa"
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


def register(base: str) -> str:
    """Register the dispatching attention function and mask function for ``base``; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    name = implementation_name(base)
    AttentionInterface.register(name, _dispatcher(base))
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
    return name


@contextlib.contextmanager
def structures(model: nn.Module, batch: Mapping[str, Structure]) -> Iterator[None]:
    """Within the block, attached layers of ``model`` read ``batch`` (name -> batched Structure) when the
    forward call carries no ``structures=`` keyword (for callers that cannot pass extra keywords)."""
    del model  # the structures are per call, not per model; the argument documents which model reads them
    token = _ACTIVE.set(dict(batch))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _dispatcher(base: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor | None]]:
    def structattn_attention(
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attached = getattr(module, "structattn", None)
        if attached is None:
            return _base_function(base, module)(module, query, key, value, attention_mask, **kwargs)
        return _attend(attached, query, key, value, attention_mask, **kwargs)

    structattn_attention.__name__ = f"structattn_{base}_attention"
    return structattn_attention


def _base_function(base: str, module: nn.Module) -> Callable[..., Any]:
    if base == "eager":
        return inspect.getmodule(type(module)).eager_attention_forward  # the family's own eager path
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return ALL_ATTENTION_FUNCTIONS[base]


def _attend(
    attached: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    structures: Mapping[str, Structure] | None = None,
    output_attentions: bool | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run the attached variants; HF wants ``(out (b, n, h, d), weights (b, h, n, n) or None)``.

    ``dropout`` (the config's attention-probability dropout in training) is not applied: structattn variants
    have no dropout on attention weights.
    """
    del dropout
    d = query.shape[-1]
    if scaling is not None and abs(scaling - d**-0.5) > 1e-9 * d**-0.5:
        raise ValueError(f"layer {attached.layer}: the model scales scores by {scaling}, structattn variants by d**-0.5")
    if structures is None:
        structures = _ACTIVE.get()
    token_mask = key_padding_from_mask(attention_mask, query.shape[0], query.shape[-2], query.device)
    out, weights = attached(query, key, value, token_mask, structures, return_weights=bool(output_attentions))
    return out.transpose(1, 2).contiguous(), weights


def key_padding_from_mask(
    attention_mask: torch.Tensor | None, b: int, n: int, device: torch.device
) -> torch.Tensor:
    """``token_mask`` (b, n), True on real keys, from the 4-d mask HF hands to attention functions.

    Accepts ``None`` (no padding), a bool mask (True = may attend, the ``sdpa`` form) or an additive float
    mask (0 or the dtype's minimum, the ``eager`` form), shaped (b, 1, n, n).

    Raises:
        ValueError: the mask differs between queries (a causal or otherwise structured mask: structattn
            variants handle padding only).
    """
    if attention_mask is None:
        return torch.ones(b, n, dtype=torch.bool, device=device)
    allowed = attention_mask if attention_mask.dtype == torch.bool else attention_mask > torch.finfo(attention_mask.dtype).min / 2
    allowed = allowed.expand(b, 1, n, n)[:, 0]  # (b, n, n)
    token_mask = allowed[:, 0]
    if not bool((allowed == token_mask[:, None, :]).all()):
        raise ValueError(
            "structattn.hf: the attention mask differs between queries (causal or decoder masks are not "
            "supported; only padding is)"
        )
    return token_mask


@contextlib.contextmanager
def eager_attention(model: nn.Module) -> Iterator[None]:
    """Within the block ``model`` runs eager attention (every layer can return its weights: ``sdpa`` cannot),
    through structattn's dispatcher when the model is attached; its setting is restored afterwards."""
    before = model.config._attn_implementation
    attached = before is not None and before.startswith(PREFIX)
    model.set_attn_implementation(register("eager") if attached else "eager")
    try:
        yield
    finally:
        model.set_attn_implementation(before)
