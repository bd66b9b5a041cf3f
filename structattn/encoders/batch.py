"""The model input: token ids, padding mask, named structures, labels."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from structattn.structures.structure import Structure


@dataclass
class Batch:
    """One padded batch.

    Attributes:
        input_ids: (b, n) long, 0 on padding.
        token_mask: (b, n) bool, True on real tokens.
        structures: batched structures by name, each over the same (b, n) tokens.
        labels: task targets at word level ((b,) for sentences, (b, w) for tokens and pairs, -100 ignored),
            or ``None``.
        word_ids: (b, n) long, the word each token belongs to, -1 for specials and padding; ``None`` when
            tokens are words.
        ids: sentence ids, in batch order.
    """

    input_ids: torch.Tensor
    token_mask: torch.Tensor
    structures: dict[str, Structure] = field(default_factory=dict)
    labels: torch.Tensor | None = None
    word_ids: torch.Tensor | None = None
    ids: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.input_ids.shape != self.token_mask.shape or self.input_ids.dim() != 2:
            raise ValueError(
                f"input_ids {tuple(self.input_ids.shape)} and token_mask {tuple(self.token_mask.shape)} must both be (b, n)"
            )
        for name, s in self.structures.items():
            if s.token_mask is None or s.token_mask.shape != self.token_mask.shape:
                shape = None if s.token_mask is None else tuple(s.token_mask.shape)
                raise ValueError(f"structure {name!r} covers tokens {shape}, the batch has {tuple(self.token_mask.shape)}")

    @property
    def word_starts(self) -> tuple[torch.Tensor, torch.Tensor]:
        """First token of every word and the word mask: ``(b, w)`` long and ``(b, w)`` bool.

        Without ``word_ids`` tokens are words: ``arange(n)`` and ``token_mask``.
        """
        b, n = self.input_ids.shape
        if self.word_ids is None:
            return torch.arange(n, device=self.input_ids.device).expand(b, n), self.token_mask
        num_words = int(self.word_ids.max()) + 1 if self.word_ids.numel() else 0
        positions = torch.arange(n, device=self.word_ids.device).expand(b, n)
        big = torch.full_like(self.word_ids, n)
        starts = torch.full((b, max(num_words, 1)), n, dtype=torch.long, device=self.word_ids.device)
        valid = self.word_ids >= 0
        starts.scatter_reduce_(1, self.word_ids.clamp(min=0), torch.where(valid, positions, big), reduce="amin")
        word_mask = starts < n
        return starts.clamp(max=n - 1), word_mask

    def to(self, device: torch.device | str) -> "Batch":
        """A copy on ``device``."""
        return replace(
            self,
            input_ids=self.input_ids.to(device),
            token_mask=self.token_mask.to(device),
            structures={k: s.to(device) for k, s in self.structures.items()},
            labels=None if self.labels is None else self.labels.to(device),
            word_ids=None if self.word_ids is None else self.word_ids.to(device),
        )
