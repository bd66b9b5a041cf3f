"""``window``: a sliding window with optional dilation and global tokens, kept in compact form."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from structattn.structures.providers.base import Item, StructureProvider, _token_mask, register_provider
from structattn.structures.structure import Structure


@register_provider("window")
class WindowProvider(StructureProvider):
    """Local window of ``radius`` tokens on each side (every ``dilation``-th token) plus global tokens.

    The structure keeps only ``window_radius``, ``dilation``, ``is_global`` and ``token_mask``; a dense
    ``distance`` is built only when asked for (``structure.dense_distance()``): ``|i - j|`` inside the window,
    ``1`` between a global token and any other token, ``-1`` elsewhere (see ``window_math.band_distance``).

    Args:
        radius: tokens on each side (>= 0).
        dilation: step between attended positions (>= 1).
        global_tokens: positions that are global (negative counts from the end, e.g. ``(0,)`` for a [CLS]).
    """

    provides = frozenset({"distance", "adjacency", "token_mask", "band", "is_global"})

    def __init__(self, radius: int = 3, dilation: int = 1, global_tokens: Sequence[int] = ()) -> None:
        if radius < 0:
            raise ValueError(f"window radius must be >= 0, got {radius}")
        if dilation < 1:
            raise ValueError(f"window dilation must be >= 1, got {dilation}")
        self.radius = int(radius)
        self.dilation = int(dilation)
        self.global_tokens = tuple(int(g) for g in global_tokens)

    def options(self) -> dict[str, Any]:
        return {"radius": self.radius, "dilation": self.dilation, "global_tokens": self.global_tokens}

    def compute(self, items: list[Item]) -> Structure:
        lengths = [len(x) for x in items]
        token_mask = _token_mask(lengths)
        is_global = torch.zeros_like(token_mask)
        for k, (item, n) in enumerate(zip(items, lengths)):
            for g in self.global_tokens:
                if not -n <= g < n:
                    raise ValueError(f"window: global token {g} outside sentence {item.id!r} of {n} tokens")
                is_global[k, g % n] = True
        return Structure(token_mask=token_mask, window_radius=self.radius, dilation=self.dilation, is_global=is_global)
