"""``attach(model, plan)``: structattn attention variants inside a Hugging Face encoder's layers."""

from __future__ import annotations

from typing import Any, Mapping

from torch import nn

import structattn
from structattn.encoders.builder import build_group, with_layer_width
from structattn.encoders.plan import HeadGroup, parse_plan
from structattn.hf.auto_config import mark_attached
from structattn.hf import deberta, families, interface
from structattn.hf.attached import AttachedAttention
from structattn.hf.input_length import refuse_over_long_inputs
from structattn.hf.model_terms import accepts_model_terms
from structattn.structures.providers import get_provider

#: The key of ``model.config`` under which the plan is saved (``config.json`` beside the weights).
CONFIG_KEY = "structattn"


def attach(
    model: nn.Module, plan: str, structure_fields: Mapping[str, set[str] | frozenset[str]] | None = None
) -> nn.Module:
    """Give the layers that ``plan`` names structattn attention; the other layers stay the model's own.

    Each attached layer's self-attention module gets a submodule ``structattn``
    (:class:`~structattn.hf.attached.AttachedAttention`) holding the variants' parameters; its q/k/v/out
    projections stay the model's. ``config._attn_implementation`` of the attached stack becomes
    ``"structattn_<base>"`` (base: the model's ``sdpa`` or ``eager``), a function registered in
    ``transformers.AttentionInterface`` that runs the variants on attached layers and the base implementation,
    unchanged, elsewhere (DeBERTa-v2, whose attention bypasses the interface: the attached modules' class is
    replaced instead, see :mod:`structattn.hf.deberta`). The plan is recorded in ``model.config.structattn`` so
    that ``save_pretrained`` keeps it.

    What the model adds to its scores is kept and the variants' terms are added to it: rotary positions
    (ModernBERT: already in q and k), T5's relative position bias, DeBERTa's c2p/p2c scores, ModernBERT's
    sliding window on local layers (intersected with each variant's allowed keys); see
    :mod:`structattn.hf.model_terms`. An encoder-decoder model (T5, BART, Marian) is attached in its encoder
    only (``model.get_encoder()``; the plan counts its layers). ALBERT's one layer serves every layer: the plan
    must give every layer the same groups.

    Args:
        model: a model of a supported family (:func:`structattn.hf.supported_families`), any head, or the
            encoder of an encoder-decoder model.
        plan: the layer plan (:mod:`structattn.encoders.plan`); a layer planned as plain ``full`` keeps the
            model's attention untouched.
        structure_fields: for each structure name the plan uses, the fields its provider fills; by default
            the ``provides`` of the provider registered under that name.

    Returns:
        the same model, modified in place.

    Raises:
        ValueError: unsupported or causal architecture (named, with the reason), a plan that does not fit the
            model's layers and heads (or differs between ALBERT's shared layers), a variant that cannot keep
            the model's own score terms on a layer that has them, a structure that lacks fields a variant
            needs, or a model already attached. Once attached, the model's forward refuses a batch longer than its
            position table (:mod:`structattn.hf.input_length`), naming each sentence over it, its token count, the
            limit and the truncation option.
    """
    found = families.find_layers(model)
    modules, config = found.modules, model.config
    if any(getattr(m, "structattn", None) is not None for m in modules):
        raise ValueError(f"{type(model).__name__} already has structattn attention attached; attach once")
    if getattr(config, CONFIG_KEY, None):
        raise ValueError(
            f"{type(model).__name__} was saved with structattn plan {getattr(config, CONFIG_KEY).get('plan')!r} but "
            "loaded without it (its structattn weights were dropped); load it with structattn.hf.from_pretrained"
        )
    layers = parse_plan(plan, found.num_layers, families.num_heads(modules[0]))
    if found.family.shared_layers:
        layers = _shared_plan(layers, len(modules), plan, type(model).__name__)
    fields = _structure_fields(layers, structure_fields)
    base = interface.base_of(getattr(found.stack.config, "_attn_implementation", None))
    built = _build(found, layers, fields, found.stack.config.hidden_size)  # a bad group leaves the model untouched
    if found.family.route == "deberta":
        interface.implementation_name(base)  # checks the base
        for index, attached in built.items():
            modules[index].add_module("structattn", attached)
            deberta.patch(modules[index])
        if built:  # the model with its head, and the bare model for callers that call it directly
            deberta.take_structures_from_calls(model)
            if model.base_model is not model:
                deberta.take_structures_from_calls(model.base_model)
    else:
        name = interface.register(base)
        for index, attached in built.items():
            modules[index].add_module("structattn", attached)
            modules[index].register_forward_pre_hook(_before_attention, with_kwargs=True)
        found.stack.set_attn_implementation(name)
    refuse_over_long_inputs(model)  # a batch past the position table: named here, not deep in the embeddings
    setattr(config, CONFIG_KEY, {"plan": plan, "base_attention": base, "version": structattn.__version__,
                                 "structure_fields": {k: sorted(v) for k, v in fields.items()}})
    return mark_attached(model)  # saved as model type structattn_<family>: Auto classes load it with its plan or refuse


def attached_layers(model: nn.Module) -> dict[int, AttachedAttention]:
    """The attached layers of ``model`` by layer index (ALBERT: by shared module, 0 for the usual one)."""
    out = {}
    for module in families.self_attention_modules(model):
        attached = getattr(module, "structattn", None)
        if attached is not None:
            out[attached.layer] = attached
    return out


def _build(
    found: families.Layers, layers: list[list[HeadGroup]], fields: dict[str, set[str]], d_model: int
) -> dict[int, AttachedAttention]:
    """The ``AttachedAttention`` of every module the plan does not leave as plain ``full``, checked against the
    model's own score terms on that layer."""
    built = {}
    for index, (module, groups) in enumerate(zip(found.modules, layers)):
        if _is_plain_full(groups):  # the model's own attention, untouched (DeBERTa: its own class and forward)
            continue
        variants = [build_group(with_layer_width(g, d_model), index, families.head_dim(module), fields) for g in groups]
        terms = found.family.layer_terms(module)
        for group, variant in zip(groups, variants):
            if terms and not accepts_model_terms(variant):
                raise ValueError(
                    f"layer {index}, group {group.label!r}: {found.family.name} adds {terms} to this layer's scores, "
                    f"and {group.variant!r} cannot keep them (only 'full' and variants built on BiasedAttention, "
                    f"e.g. soft_bias, hard_mask, fixed_decay, add a bias or restrict keys on top of the model's)"
                )
        weight = next(module.parameters())
        built[index] = AttachedAttention(index, groups, variants).to(device=weight.device, dtype=weight.dtype)
    return built


def _shared_plan(layers: list[list[HeadGroup]], num_modules: int, plan: str, who: str) -> list[list[HeadGroup]]:
    """ALBERT: one module serves several layers, so every layer must have the same groups; returns the groups of
    each distinct module."""
    different = [i for i, groups in enumerate(layers) if groups != layers[0]]
    if different:
        raise ValueError(
            f"{who}: plan {plan!r} gives layer {different[0]} other attention than layer 0, but the layers share "
            f"their weights (one attention module serves every layer): give one plan for all layers, e.g. "
            f"'soft_bias(dependency)'"
        )
    return [layers[0]] * num_modules


def _is_plain_full(groups: list[HeadGroup]) -> bool:
    return len(groups) == 1 and groups[0].variant == "full" and groups[0].structure is None and not groups[0].options


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
