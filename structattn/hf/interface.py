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
    token = activate(batch)
    try:
        yield
    finally:
        deactivate(token)


def activate(batch: Mapping[str, Structure]) -> contextvars.Token:
    """Make ``batch`` the structures attached layers read when a call carries none; undo with :func:`deactivate`."""
    return _ACTIVE.set(dict(batch))


def deactivate(token: contextvars.Token) -> None:
    """Undo one :func:`activate`."""
    _ACTIVE.reset(token)


def active_structures() -> Mapping[str, Structure] | None:
    """The structures set by :func:`structures` / :func:`activate`, or ``None``."""
    return _ACTIVE.get()


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
    position_bias: torch.Tensor | None = None,
    sliding_window: int | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run the attached variants; HF wants ``(out (b, n, h, d), weights (b, h, n, n) or None)``.

    The model's own terms are kept: a ``scaling`` other than the variants' ``d ** -0.5`` (T5: 1) is folded
    into q; T5's ``position_bias`` (1 or b, h, n, n) is added to the scores; on a layer the model calls with
    a ``sliding_window`` (ModernBERT's local layers) the mask it hands over (padding and window) restricts
    every group's keys (:mod:`structattn.hf.model_terms`).

    ``dropout`` (the config's attention-probability dropout in training) is not applied: structattn variants
    have no dropout on attention weights.
    """
    del dropout
    query = scaled_query(query, scaling)
    if structures is None:
        structures = active_structures()
    b, _, n, _ = query.shape
    token_mask, window = padding_and_window(attention_mask, b, n, query.device, windowed=sliding_window is not None)
    out, weights = attached(query, key, value, token_mask, structures, return_weights=bool(output_attentions),
                            model_bias=position_bias, model_allowed=window)
    return out.transpose(1, 2).contiguous(), weights


def scaled_query(query: torch.Tensor, scaling: float | None) -> torch.Tensor:
    """``query`` times ``scaling * sqrt(d)``, so that the variants' ``q . k / sqrt(d)`` is the model's
    ``scaling * q . k`` (unchanged when ``scaling`` is ``None`` or ``d ** -0.5``).

    Shapes:
        query ``(b, h, n, d)``.
    """
    d = query.shape[-1]
    if scaling is None or abs(scaling - d**-0.5) <= 1e-9 * d**-0.5:
        return query
    return query * (scaling * d**0.5)


def padding_and_window(
    attention_mask: torch.Tensor | None, b: int, n: int, device: torch.device, windowed: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``token_mask`` (b, n) and, on a sliding-window layer, the model's allowed pairs (b, 1, n, n).

    On a windowed layer the mask differs between queries by design: the real keys are read from its diagonal
    (every real token may attend to itself) and the whole mask is returned, to be intersected with each
    variant's allowed keys. Elsewhere it is :func:`key_padding_from_mask` and the window is ``None``.

    Raises:
        ValueError: a mask that differs between queries on a layer without a sliding window (causal).
    """
    if not windowed or attention_mask is None:
        return key_padding_from_mask(attention_mask, b, n, device), None
    allowed = allowed_pairs(attention_mask).expand(b, 1, n, n)
    return allowed[:, 0].diagonal(dim1=-2, dim2=-1), allowed


def allowed_pairs(attention_mask: torch.Tensor) -> torch.Tensor:
    """The pairs a 4-d HF mask allows: a bool mask as is (the ``sdpa`` form), an additive float one where it
    is above half the dtype's minimum (the ``eager`` form, 0 or the minimum)."""
    if attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > torch.finfo(attention_mask.dtype).min / 2


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
    allowed = allowed_pairs(attention_mask).expand(b, 1, n, n)[:, 0]  # (b, n, n)
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
    from structattn.hf.families import find_layers

    try:
        model = find_layers(model).stack  # an encoder-decoder model: its encoder, which may have its own config
    except ValueError:
        pass  # not a model structattn attaches to: switched as it is
    before = model.config._attn_implementation
    attached = before is not None and before.startswith(PREFIX)
    model.set_attn_implementation(register("eager") if attached else "eager")
    try:
        yield
    finally:
        model.set_attn_implementation(before)
