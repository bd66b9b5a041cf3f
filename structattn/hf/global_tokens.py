"""Global tokens in token-aligned dense structures: [CLS]/[SEP] (or chosen ids) one hop from every real token.

``align_to_subwords`` leaves special tokens real but unreachable, so under ``hard_mask`` a [CLS] query sees
only itself and no word sees [CLS]; under ``soft_bias`` they fall in the "unreachable" bucket. Making a token
global (as Longformer's and ETC's global tokens, Beltagy et al. 2020, Ainslie et al. 2020) sets, for every
other real token ``j`` of its sentence, ``distance[g, j] = distance[j, g] = 1`` (pairs already at distance 0
stay 0) and adjacency on both ways: a global token shares the distance-1 bucket of ``soft_bias`` and is
inside any ``hard_mask`` radius >= 1. ``is_global`` records which tokens are global.

Glossary: b batch, n tokens.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import torch

from structattn.structures.structure import Structure

#: The distance a global token has to and from every other real token.
GLOBAL_DISTANCE = 1


def with_global_tokens(structure: Structure, is_global: torch.Tensor) -> Structure:
    """A copy of a batched dense ``structure`` in which the ``is_global`` tokens reach and are reached by every
    real token of their sentence at :data:`GLOBAL_DISTANCE`.

    Shapes:
        structure: distance/adjacency (b, n, n), token_mask (b, n); is_global: (b, n) bool (padding ignored).

    Raises:
        ValueError: an unbatched or window-form structure, or an ``is_global`` of another shape.
    """
    if not structure.is_batched or structure.distance is None:
        raise ValueError("with_global_tokens: takes a batched structure with a dense distance (window structures "
                         "have the window provider's own global_tokens)")
    token_mask = structure.token_mask
    if tuple(is_global.shape) != tuple(token_mask.shape):
        raise ValueError(f"with_global_tokens: is_global has shape {tuple(is_global.shape)}, the structure "
                         f"{tuple(token_mask.shape)}")
    is_global = is_global.to(torch.bool) & token_mask
    real_pair = token_mask[:, :, None] & token_mask[:, None, :]  # (b, n, n)
    reach = (is_global[:, :, None] | is_global[:, None, :]) & real_pair
    distance = structure.distance
    distance = torch.where(reach & (distance != 0), torch.full_like(distance, GLOBAL_DISTANCE), distance)
    adjacency = None if structure.adjacency is None else structure.adjacency | reach
    before = structure.is_global
    return replace(structure, distance=distance, adjacency=adjacency,
                   is_global=is_global if before is None else before | is_global)


def global_token_mask(
    choice: str | Sequence[int], input_ids: torch.Tensor, attention_mask: torch.Tensor,
    word_ids: Sequence[Sequence[int | None]],
) -> torch.Tensor:
    """Which tokens a :class:`~structattn.hf.collator.StructureCollator` ``global_tokens`` choice makes global.

    Args:
        choice: ``"special"`` (every real token without a word: [CLS], [SEP], <s>, </s>) or vocabulary ids
            (``[tokenizer.cls_token_id]``).
        input_ids, attention_mask: the tokenizer's batch; word_ids: per sentence, each real token's word.

    Shapes:
        input_ids, attention_mask: (b, n); returns (b, n) bool.
    """
    real = attention_mask.bool()
    if isinstance(choice, str):
        out = torch.zeros_like(real)
        for k, ids in enumerate(word_ids):
            out[k, : len(ids)] = torch.tensor([w is None for w in ids], dtype=torch.bool)
        return out & real
    return torch.isin(input_ids, torch.tensor(list(choice), dtype=input_ids.dtype)) & real


def check_global_choice(choice: Any, tokenizer: Any) -> str | tuple[int, ...] | None:
    """Validate a ``global_tokens`` option: ``None``, ``"special"`` or vocabulary ids of ``tokenizer``.

    Raises:
        ValueError: another string, a non-integer, or an id outside the tokenizer's vocabulary (named).
    """
    if choice is None or choice == "special":
        return choice
    if isinstance(choice, str):
        raise ValueError(f"StructureCollator: global_tokens={choice!r}; use None, 'special' or a list of token ids "
                         "(e.g. [tokenizer.cls_token_id])")
    ids = tuple(choice)
    bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(tokenizer)]
    if bad or not ids:
        raise ValueError(f"StructureCollator: global_tokens {list(ids)} must be token ids in [0, {len(tokenizer)}); "
                         f"bad: {bad or 'empty list'}")
    return ids
