"""Refuse, at an attached model's forward, a batch longer than the model's position table.

A :class:`~structattn.hf.collator.StructureCollator` built without ``model`` and with a tokenizer that sets no
``model_max_length`` knows no limit, so a 2,000-word sentence reaches the model whole and fails deep inside the
position embeddings ("The size of tensor a (6269) must match the size of tensor b (64)"). The hook that
:func:`structattn.hf.attach` registers says instead which sentences are too long, by how much, and which option
truncates.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

import torch
from torch import nn

from structattn.hf import interface
from structattn.hf.auto_config import base_model_type
from structattn.hf.families import NO_POSITION_LIMIT, position_limit
from structattn.structures.sentence import describe_sentence
from structattn.structures.structure import Structure

#: families whose positions are computed, not looked up: an input past ``max_position_embeddings`` still runs
NO_POSITION_TABLE = ("modernbert",)


def refuse_over_long_inputs(model: nn.Module) -> None:
    """Give ``model`` (and its bare ``base_model`` and, for an encoder-decoder model, its encoder: callers may call
    either directly) a forward pre-hook that raises ``ValueError`` for an input longer than the model's position
    table (see :func:`check_input_length`)."""
    limit = model_position_limit(model.config.to_dict())
    if limit is None:
        return
    targets = [model, getattr(model, "base_model", model)]
    if getattr(model.config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        targets.append(model.get_encoder())
    for target in {id(t): t for t in targets}.values():
        target.register_forward_pre_hook(functools.partial(_check_call, limit), with_kwargs=True)


def model_position_limit(config: Mapping[str, Any]) -> int | None:
    """Tokens the model's absolute positions cover (:func:`~structattn.hf.families.position_limit`), or ``None``
    when it has no absolute position table, so that a longer input runs (T5's relative buckets, ModernBERT's
    rotary positions, DeBERTa-v2/v3 without ``position_biased_input``): only what would fail is refused."""
    config = {**config, "model_type": base_model_type(str(config.get("model_type", "")))}
    if config["model_type"] in NO_POSITION_TABLE:
        return None
    if config["model_type"] == "deberta-v2" and not config.get("position_biased_input", True):
        return None
    try:
        limit = position_limit(config)
    except ValueError:  # no max_position_embeddings: nothing known to check against
        return None
    return None if limit >= NO_POSITION_LIMIT else limit


def _check_call(limit: int, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The forward pre-hook (bound to ``limit`` by ``functools.partial``, so a pickled model keeps it)."""
    if kwargs.get("position_ids") is not None:  # the caller chose the positions (packing, offsets)
        return
    tokens = kwargs.get("input_ids", args[0] if args else None)
    if tokens is None:
        tokens = kwargs.get("inputs_embeds")
    if isinstance(tokens, torch.Tensor) and tokens.dim() >= 2:
        check_input_length(tokens.shape[0], tokens.shape[1], limit, kwargs.get("attention_mask"),
                           kwargs.get("structures") or interface.active_structures())


def check_input_length(b: int, n: int, limit: int, attention_mask: Any,
                       structures: Mapping[str, Structure] | None) -> None:
    """``ValueError`` when a batch of ``b`` sentences and ``n`` tokens is longer than ``limit`` positions, naming
    each sentence over the limit (its id from the batch's structures, else its row), its token count (real tokens
    by ``attention_mask`` when given), the limit and the options that truncate."""
    if n <= limit:
        return
    lengths = [n] * b
    if isinstance(attention_mask, torch.Tensor) and tuple(attention_mask.shape) == (b, n):
        lengths = [int(x) for x in attention_mask.sum(-1).tolist()]
    ids = _sentence_ids(structures, b)
    long = [f"{ids[row]} has {count} tokens" for row, count in enumerate(lengths) if count > limit]
    more = f" (and {len(long) - 3} more sentence(s))" if len(long) > 3 else ""
    named = "; ".join(long[:3]) + more if long else f"the batch is padded to {n} tokens"
    raise ValueError(
        f"{named}: more than the model's {limit} positions (max_position_embeddings of its config); pass "
        f"truncation=True with max_length={limit} to StructureCollator to keep the first {limit} tokens (or give it "
        "model=... to refuse such a sentence at collation), or split or drop the sentence"
    )


def _sentence_ids(structures: Mapping[str, Structure] | None, rows: int) -> list[str]:
    """How the message names each row: by the sentence id its structures carry, else ``row k of the batch``."""
    for structure in (structures or {}).values():
        ids = getattr(structure, "ids", None)
        if isinstance(ids, list) and len(ids) == rows:
            return [describe_sentence(i) if i is not None else f"row {k} of the batch" for k, i in enumerate(ids)]
    return [f"row {k} of the batch" for k in range(rows)]
