"""Which parameters AdamW decays (see :class:`structattn.training.config.TrainConfig`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from structattn.attention.base import StructuredAttention


def _attention_exempt(model: nn.Module) -> set[int]:
    """Ids of the parameters owned by a ``StructuredAttention`` module that are not the weight of an
    ``nn.Linear`` inside it (bias tables, scales, gates)."""
    exempt: set[int] = set()
    for module in model.modules():
        if not isinstance(module, StructuredAttention):
            continue
        linear_weights = {id(m.weight) for m in module.modules() if isinstance(m, nn.Linear)}
        exempt |= {id(p) for p in module.parameters() if id(p) not in linear_weights}
    return exempt


def decays(model: nn.Module) -> dict[str, bool]:
    """``{parameter name: True when AdamW decays it}`` for every trainable parameter of ``model``.

    Rule: no decay for tensors with fewer than 2 dimensions (LayerNorm gains, biases, scalar scales) and for
    parameters of a ``StructuredAttention`` module (bias tables of any shape) unless they are the weight of an
    ``nn.Linear`` inside it (``ssan``'s policy projections decay like every other linear weight).
    """
    exempt = _attention_exempt(model)
    return {name: p.dim() >= 2 and id(p) not in exempt
            for name, p in model.named_parameters() if p.requires_grad}


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW parameter groups: ``[{"params": decayed, "weight_decay": weight_decay},
    {"params": the rest, "weight_decay": 0.0}]`` (see :func:`decays`), in ``named_parameters`` order."""
    rule = decays(model)
    params = dict(model.named_parameters())
    decayed: list[torch.nn.Parameter] = [params[n] for n, d in rule.items() if d]
    kept: list[torch.nn.Parameter] = [params[n] for n, d in rule.items() if not d]
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": kept, "weight_decay": 0.0}]
