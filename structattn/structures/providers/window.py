"""``window``: a sliding window with optional dilation and global tokens, kept in compact form."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from structattn.structures._checks import int_option
from structattn.structures.providers.base import Item, StructureProvider, lengths_token_mask, register_provider
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
        global_tokens: positions that are global, e.g. ``(0,)`` for a [CLS]; the word ``"last"`` names each
            sentence's last token (e.g. a [SEP]: sentences differ in length, so no position can say that).
            Negative positions are refused (``-1`` would silently mean the last token); each position must
            lie in every sentence: ``0 <= g < n``.

    Raises:
        ValueError: a radius, dilation or global position that is not an integer (``1.5``, ``True``), a
            negative radius, a dilation below 1, or (when computing) a global position
            outside a sentence, naming the sentence, the position and the length.
    """

    provides = frozenset({"distance", "adjacency", "token_mask", "band", "is_global"})
    symmetric = True  # |i - j| and global links read the same both ways

    def __init__(self, radius: int = 3, dilation: int = 1, global_tokens: Sequence[int | str] = ()) -> None:
        self.radius = int_option(radius, "radius", "window", minimum=0)
        self.dilation = int_option(dilation, "dilation", "window", minimum=1)
        if isinstance(global_tokens, (str, bytes)) or not hasattr(global_tokens, "__iter__"):
            raise ValueError(f"window: global_tokens must be a sequence of positions, got {global_tokens!r}")
        self.global_tokens = tuple(_global_position(g, k) for k, g in enumerate(global_tokens))

    def options(self) -> dict[str, Any]:
        return {"radius": self.radius, "dilation": self.dilation, "global_tokens": self.global_tokens}

    def compute(self, items: list[Item]) -> Structure:
        lengths = [len(x) for x in items]
        token_mask = lengths_token_mask(lengths)
        is_global = torch.zeros_like(token_mask)
        for k, (item, n) in enumerate(zip(items, lengths)):
            for g in self.global_tokens:
                position = n - 1 if g == LAST else g
                if not 0 <= position < n:
                    raise ValueError(f"window: global token {g} is outside sentence {item.id!r}, which has {n} "
                                     f"tokens (valid: 0..{n - 1}, or {LAST!r} for the last token)")
                is_global[k, position] = True
        return Structure(token_mask=token_mask, window_radius=self.radius, dilation=self.dilation, is_global=is_global)


LAST = "last"


def _global_position(value: Any, k: int) -> int | str:
    """A global-token option: a position >= 0, or ``"last"``; a negative position is an error, not Python
    indexing from the end."""
    if value == LAST:
        return LAST
    if isinstance(value, str):
        raise ValueError(f"window: global token {k} is {value!r}; give a position >= 0 or {LAST!r}")
    position = int_option(value, f"global token {k}", "window")
    if position < 0:
        raise ValueError(f"window: global token {k} is {position}: negative positions are refused (they would count "
                         f"from the end); write {LAST!r} for each sentence's last token")
    return position
