"""``attach(model, plan)``: structattn attention variants inside a Hugging Face encoder's layers."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any, Mapping

from torch import nn

import structattn
from structattn.attention.base import ATTENTION
from structattn.encoders.builder import build_group
from structattn.encoders.plan import HeadGroup, parse_plan
from structattn.hf import families, interface
from structattn.hf.attached import AttachedAttention
from structattn.structures.providers import get_provider

#: The key of ``model.config`` under which the plan is saved (``config.json`` beside the weights).
CONFIG_KEY = "structattn"


def attach(
    model: nn.Module, plan: str, structure_fields: Mapping[str, set[str] | frozenset[str]] | None = None
) -> nn.Module:
    """Give the layers that ``plan`` names structattn attention; the other layers stay the model's own.

    Each attached layer's self-attention module gets a submodule ``structattn``
    (:class:`~structattn.hf.attached.AttachedAttention`) holding the variants' parameters; its q/k/v/out
    projections stay the model's. ``model.config._attn_implementation`` becomes ``"structattn_<base>"``
    (base: the model's ``sdpa`` or ``eager``), a function registered in ``transformers.AttentionInterface``
    that runs the variants on attached layers and the base implementation, unchanged, elsewhere. The plan is
    recorded in ``model.config.structattn`` so that ``save_pretrained`` keeps it.

    Args:
        model: a model of a supported family (:func:`structattn.hf.supported_families`), any head.
        plan: the layer plan (:mod:`structattn.encoders.plan`); a layer planned as plain ``full`` keeps the
            model's attention untouched.
        structure_fields: for each structure name the plan uses, the fields its provider fills; by default
            the ``provides`` of the provider registered under that name.

    Returns:
        the same model, modified in place.

    Raises:
        ValueError: unsupported architecture (named), a plan that does not fit the model's layers and heads,
            a structure that lacks fields a variant needs, or a model already attached.
    """
    modules = families.self_attention_modules(model)
    config = model.config
    if any(getattr(m, "structattn", None) is not None for m in modules):
        raise ValueError(f"{type(model).__name__} already has structattn attention attached; attach once")
    if getattr(config, CONFIG_KEY, None):
        raise ValueError(
            f"{type(model).__name__} was saved with structattn plan {getattr(config, CONFIG_KEY).get('plan')!r} but "
            "loaded without it (its structattn weights were dropped); load it with structattn.hf.from_pretrained"
        )
    heads = families.num_heads(modules[0])
    layers = parse_plan(plan, len(modules), heads)
    fields = _structure_fields(layers, structure_fields)
    base = interface.base_of(getattr(config, "_attn_implementation", None))
    built = {}  # every layer is built before any is attached: a bad group leaves the model untouched
    for index, (module, groups) in enumerate(zip(modules, layers)):
        if not _is_plain_full(groups):
            variants = [build_group(_with_width(g, config.hidden_size), index, families.head_dim(module), fields)
                        for g in groups]
            weight = next(module.parameters())
            built[index] = AttachedAttention(index, groups, variants).to(device=weight.device, dtype=weight.dtype)
    name = interface.register(base)
    for index, attached in built.items():
        modules[index].add_module("structattn", attached)
        modules[index].register_forward_pre_hook(_before_attention, with_kwargs=True)
    model.set_attn_implementation(name)
    setattr(config, CONFIG_KEY, {"plan": plan, "base_attention": base, "version": structattn.__version__,
                                 "structure_fields": {k: sorted(v) for k, v in fields.items()}})
    return model


def attached_layers(model: nn.Module) -> dict[int, AttachedAttention]:
    """The attached layers of ``model`` by layer index."""
    out = {}
    for module in families.self_attention_modules(model):
        attached = getattr(module, "structattn", None)
        if attached is not None:
            out[attached.layer] = attached
    return out


def _is_plain_full(groups: list[HeadGroup]) -> bool:
    return len(groups) == 1 and groups[0].variant == "full" and groups[0].structure is None and not groups[0].options


def _with_width(group: HeadGroup, d_model: int) -> HeadGroup:
    """Give variants that read the layer input (``ssan``'s policy) the model width unless the plan sets it."""
    cls = ATTENTION.get(group.variant)
    if cls.needs_hidden and "d_model" in inspect.signature(cls.__init__).parameters and "d_model" not in group.options:
        return replace(group, options={**group.options, "d_model": d_model})
    return group


def _structure_fields(
    layers: list[list[HeadGroup]], given: Mapping[str, set[str] | frozenset[str]] | None
) -> dict[str, set[str]]:
    names = {g.structure for groups in layers for g in groups if g.structure is not None}
    out = {k: set(v) for k, v in (given or {}).items()}
    for name in sorted(names - set(out)):
        try:
            out[name] = set(get_provider(name).provides)
        except (KeyError, ValueError):
            raise ValueError(
                f"the plan names structure {name!r}, which is no registered provider; pass "
                f"structure_fields={{{name!r}: {{...fields...}}}} to attach"
            ) from None
    return out


def _before_attention(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Forward pre-hook of an attached layer: refuse to run when the model no longer routes attention to
    structattn (the variants would be skipped silently), and hand the layer input to variants that read it."""
    attached = module.structattn
    implementation = module.config._attn_implementation
    if not (implementation or "").startswith(interface.PREFIX):
        raise RuntimeError(
            f"layer {attached.layer} has structattn attention attached, but config._attn_implementation is "
            f"{implementation!r}, so it would be skipped; set it back with "
            f"model.set_attn_implementation('{interface.PREFIX}sdpa') (or use structattn.hf.interface.eager_attention)"
        )
    if attached.needs_hidden:
        attached.hidden = args[0] if args else kwargs["hidden_states"]
