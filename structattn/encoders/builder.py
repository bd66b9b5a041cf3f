"""Wiring an :class:`Encoder` from sizes, an attention plan and the structures at hand."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Mapping

from torch import nn

from structattn.attention.base import ATTENTION, StructuredAttention, get_attention
from structattn.encoders.config import EncoderConfig
from structattn.encoders.encoder import Encoder
from structattn.encoders.layer import EncoderLayer
from structattn.encoders.plan import HeadGroup, parse_plan
from structattn.encoders.positions import make_positions
from structattn.encoders.self_attention import StructuredSelfAttention


def build_encoder(
    config: EncoderConfig,
    plan: str,
    vocab_size: int,
    structure_fields: Mapping[str, frozenset[str] | set[str]],
) -> Encoder:
    """Build the encoder and check, before any training, that every variant gets the fields it needs.

    Args:
        config: sizes.
        plan: the attention plan (see :mod:`structattn.encoders.plan`).
        vocab_size: number of token ids (id 0 is padding).
        structure_fields: for every structure the batches will carry, the fields its provider fills
            (``provider.provides``).

    Raises:
        ValueError: unknown variant, unknown structure name, a variant whose required fields the structure
            lacks, or bad variant options; the message names the layer and the group.
    """
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2 (padding + one token), got {vocab_size}")
    layers, used = [], set()
    for index, groups in enumerate(parse_plan(plan, config.num_layers, config.num_heads)):
        modules = [build_group(with_layer_width(g, config.d_model), index, config.head_dim, structure_fields)
                   for g in groups]
        used |= {g.structure for g in groups if g.structure is not None}
        attention = StructuredSelfAttention(config.d_model, groups, modules)
        layers.append(EncoderLayer(attention, config.d_model, config.ffn_dim, config.dropout))
    embedding = nn.Embedding(vocab_size, config.d_model, padding_idx=0)
    nn.init.normal_(embedding.weight, std=config.d_model**-0.5)
    positions = make_positions(config.positions, config.d_model, config.max_len)
    return Encoder(embedding, positions, layers, config.dropout, used)


def with_layer_width(group: HeadGroup, d_model: int) -> HeadGroup:
    """``group`` with ``d_model`` = the layer's width for variants that read the layer input (``ssan``'s policy
    reads all of ``hidden``, whatever share of the heads its group has), unless the plan sets it."""
    cls = ATTENTION.get(group.variant)
    if cls.needs_hidden and "d_model" in inspect.signature(cls.__init__).parameters and "d_model" not in group.options:
        return replace(group, options={**group.options, "d_model": d_model})
    return group


def build_group(
    group: HeadGroup, layer: int, head_dim: int, structure_fields: Mapping[str, frozenset[str] | set[str]]
) -> StructuredAttention:
    """The variant of one head group of ``layer``, checked to find the structure fields it needs (the
    HF attach builds its groups with this too).

    Raises:
        ValueError: an unknown structure, or one that lacks a field the variant declares, naming the layer and
            the group.
    """
    where = f"layer {layer}, group {group.label!r}"
    cls = ATTENTION.get(group.variant)
    if group.structure is None:
        available, source = {"token_mask"}, f"{where} (no structure named; write {group.variant}(STRUCTURE))"
    elif group.structure not in structure_fields:
        raise ValueError(f"{where}: unknown structure {group.structure!r}; the model has {sorted(structure_fields)}")
    else:
        available, source = set(structure_fields[group.structure]), f"structure {group.structure!r} ({where})"
    cls.check_fields(available, source=source)
    try:
        module = get_attention(group.variant, num_heads=group.num_heads, head_dim=head_dim, **group.options)
    except ValueError as err:  # a bad option (the registry's error names the variant and its signature)
        raise ValueError(f"{where}: {err}") from None
    module.check_fields(available, source=source)  # options may add fields (e.g. ssan's structure_bias)
    return module
