"""``lora_config(model)``: a PEFT LoRA configuration for an attached model whose structattn parameters train too.

LoRA (Hu et al., 2021, arXiv:2106.09685) adds ``W + (alpha / r) B A`` to the chosen projections and freezes
everything else. The structattn parameters (bias tables, SSAN policies) are new, not pretrained, so they must
train in full: each attached layer's ``structattn`` module is listed in PEFT's ``modules_to_save`` (PEFT keeps
the original frozen and trains a copy, which ``save_pretrained`` writes into the adapter and
``merge_and_unload`` puts back in place).
"""

from __future__ import annotations

from typing import Any, Sequence

from torch import nn

from structattn.hf import families

#: q/v projection names of the supported families' self-attention modules (Hu et al. adapt W_q and W_v).
QV_NAMES = (("query", "value"), ("q_lin", "v_lin"))


def lora_config(
    model: nn.Module,
    r: int = 8,
    lora_alpha: int = 16,
    lora_dropout: float = 0.0,
    target_modules: Sequence[str] | None = None,
    modules_to_save: Sequence[str] = (),
    **options: Any,
) -> Any:
    """A ``peft.LoraConfig`` on ``model``'s q/v projections that also trains its structattn modules.

    Args:
        model: an attached model (``structattn.hf.attach``).
        r, lora_alpha, lora_dropout: LoRA's rank, scale and dropout.
        target_modules: module names to adapt; default the family's q and v projections (``query``/``value``,
            DistilBERT's ``q_lin``/``v_lin``).
        modules_to_save: further modules trained in full (a new head; ``task_type=`` adds the head by itself).
        options: other ``LoraConfig`` fields (``task_type="TOKEN_CLS"``, ``bias``, ...).

    Raises:
        ValueError: ``model`` has no structattn attached (nothing to keep trainable; use ``peft.LoraConfig``),
            or its self-attention has no known q/v projection names and none were given.

    Limitation: variants that read the layer input (``ssan``) do not run under ``modules_to_save``: the hook
    that hands them the input reaches PEFT's wrapper, not the trained copy, and the layer raises a
    ``RuntimeError`` saying the input was not captured.
    """
    from peft import LoraConfig

    from structattn.hf.attach import attached_layers

    if not attached_layers(model):
        raise ValueError(f"{type(model).__name__} has no structattn attention attached; use peft.LoraConfig directly")
    if target_modules is None:
        module = families.self_attention_modules(model)[0]
        names = {name for name, _ in module.named_children()}
        found = [pair for pair in QV_NAMES if set(pair) <= names]
        if not found:
            raise ValueError(f"{type(module).__name__} has no q/v projections named {QV_NAMES}; pass target_modules")
        target_modules = found[0]
    return LoraConfig(r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, target_modules=list(target_modules),
                      modules_to_save=["structattn", *modules_to_save], **options)
