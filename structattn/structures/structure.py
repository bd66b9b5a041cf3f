"""The tensor form of a structure, for one sentence or a padded batch.

Glossary: b batch, n tokens (i queries, j keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from structattn.structures._checks import int_option
from structattn.structures.window_math import band_distance

#: Names a variant may list in ``requires``.
FIELDS = ("distance", "adjacency", "token_mask", "band", "is_global")



@dataclass
class Structure:
    """Pairwise structure over tokens.

    Dense fields (``distance``, ``adjacency``) have shape ``(n, n)`` for one sentence or ``(b, n, n)`` for a
    batch. A window structure keeps only its compact form instead (``window_radius``, ``dilation``,
    ``is_global``): its ``distance`` and ``adjacency`` attributes are ``None``, and
    :meth:`dense_distance` / :meth:`dense_adjacency` (or :meth:`materialise`, a copy with both filled in)
    build the ``n x n`` tensors on request. Reading the attributes never builds them, so code that only
    needs the band (``local_global``) stays linear in ``n``; code that needs a dense distance from any
    structure calls :meth:`dense_distance`. :meth:`fields` lists ``distance`` / ``adjacency`` for a window
    (they can be derived), which is what attention variants check.

    Attributes:
        distance: integer hops, ``distance[i, i] == 0``, ``-1`` where unreachable or padding; ``None`` for
            the compact window form (see :meth:`dense_distance`).
        adjacency: bool, self-loops on, ``False`` on padding; ``None`` when not stored (see
            :meth:`dense_adjacency`).
        token_mask: bool ``(n)`` / ``(b, n)``, ``True`` on real tokens.
        window_radius: band radius in tokens (compact window form), or ``None``.
        dilation: gap between attended positions inside the band.
        is_global: bool ``(n)`` / ``(b, n)``, tokens that reach and are reached by every token.
        directed: whether ``distance`` / ``adjacency`` are asymmetric by construction.
        source: the provider that built it.
        ids: the sentence ids, in batch order.
    """

    distance: torch.Tensor | None = None
    adjacency: torch.Tensor | None = None
    token_mask: torch.Tensor | None = None
    window_radius: int | None = None
    dilation: int = 1
    is_global: torch.Tensor | None = None
    directed: bool = False
    source: str = ""
    ids: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.distance is None and self.adjacency is None and self.window_radius is None and self.token_mask is None:
            raise ValueError("a Structure needs a distance, an adjacency, a window or at least a token_mask")
        if self.window_radius is not None:
            self.window_radius = int_option(self.window_radius, "window_radius", "Structure", minimum=0)
        if type(self.dilation) is not int or self.dilation < 1:
            self.dilation = int_option(self.dilation, "dilation", "Structure", minimum=1)
        if self.token_mask is None:
            n = self.num_tokens
            lead = self._lead_shape()
            self.token_mask = torch.ones(*lead, n, dtype=torch.bool)

    # -- shape -------------------------------------------------------------------------------------------
    def _reference(self) -> torch.Tensor:
        for t in (self.token_mask, self.distance, self.adjacency, self.is_global):
            if t is not None:
                return t
        raise ValueError("window structure without token_mask or is_global: its length is unknown")

    def _lead_shape(self) -> tuple[int, ...]:
        ref = self._reference()
        if ref is self.distance or ref is self.adjacency:
            return tuple(ref.shape[:-2])
        return tuple(ref.shape[:-1])

    @property
    def is_batched(self) -> bool:
        """Whether the structure has a leading batch dimension."""
        return len(self._lead_shape()) == 1

    @property
    def num_tokens(self) -> int:
        """n, the (padded) number of tokens."""
        return int(self._reference().shape[-1])

    @property
    def lengths(self) -> torch.Tensor:
        """Number of real tokens per sentence (``()`` or ``(b,)``)."""
        assert self.token_mask is not None
        return self.token_mask.sum(-1)

    # -- fields ------------------------------------------------------------------------------------------
    def fields(self) -> set[str]:
        """Names of the fields this structure can supply (dense ones derivable from a window included)."""
        out = {"token_mask"}
        if self.distance is not None or self.window_radius is not None:
            out.add("distance")
        if self.adjacency is not None or self.distance is not None or self.window_radius is not None:
            out.add("adjacency")
        if self.window_radius is not None:
            out.add("band")
        if self.is_global is not None:
            out.add("is_global")
        return out

    def require(self, names: set[str] | frozenset[str] | tuple[str, ...], who: str) -> None:
        """Raise ``ValueError`` naming ``who`` when any of ``names`` is missing."""
        missing = sorted(set(names) - self.fields())
        if missing:
            raise ValueError(
                f"{who} needs structure field(s) {missing}, but the structure from {self.source or 'unknown source'!r} "
                f"has only {sorted(self.fields())}"
            )

    def dense_distance(self) -> torch.Tensor:
        """The dense distance: the stored one, or built from the window form (``n x n``, not cached).

        Shapes:
            ``(n, n)`` or ``(b, n, n)``.
        """
        if self.distance is not None:
            return self.distance
        if self.window_radius is None:
            raise ValueError(f"structure from {self.source!r} has no distance")
        assert self.token_mask is not None
        return band_distance(self.token_mask, self.window_radius, self.dilation, self.is_global)

    def dense_adjacency(self) -> torch.Tensor:
        """The adjacency (``distance`` in ``{0, 1}`` when only a distance is stored)."""
        if self.adjacency is not None:
            return self.adjacency
        d = self.dense_distance()
        if self.window_radius is not None:
            return d >= 0
        return (d == 0) | (d == 1)

    # -- conversion --------------------------------------------------------------------------------------
    def materialise(self) -> "Structure":
        """A copy with dense ``distance`` and ``adjacency`` filled in."""
        return replace(self, distance=self.dense_distance(), adjacency=self.dense_adjacency())

    def to(self, device: torch.device | str) -> "Structure":
        """A copy with every tensor on ``device``."""
        moved: dict[str, Any] = {}
        for name in ("distance", "adjacency", "token_mask", "is_global"):
            t = getattr(self, name)
            moved[name] = None if t is None else t.to(device)
        return replace(self, **moved)

    def permute(self, perm: torch.Tensor) -> "Structure":
        """Reorder tokens by ``perm`` (``new[i] = old[perm[i]]``); the window form is materialised first."""
        s = self.materialise() if self.window_radius is not None else self
        out: dict[str, Any] = {"window_radius": None}
        for name in ("distance", "adjacency"):
            t = getattr(s, name)
            out[name] = None if t is None else t[..., perm, :][..., perm]
        for name in ("token_mask", "is_global"):
            t = getattr(s, name)
            out[name] = None if t is None else t[..., perm]
        return replace(s, **out)
