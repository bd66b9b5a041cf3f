"""The structured Transformer encoder: embeddings -> pre-LN layers -> final norm."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from structattn.attention.learned import LearnedQuantity
from structattn.encoders.dropout import Dropout
from structattn.encoders.layer import EncoderLayer
from structattn.structures.structure import Structure


@dataclass
class EncoderOutput:
    """What the encoder returns.

    Attributes:
        hidden: (b, n, d_model), after the final norm.
        attentions: per layer (b, h, n, n) weights, when asked for.
        bias_tables: per layer, the learned bias tables of its head groups by group label, when asked for.
    """

    hidden: torch.Tensor
    attentions: list[torch.Tensor] | None = None
    bias_tables: list[dict[str, torch.Tensor]] | None = None


class Encoder(nn.Module):
    """Token embeddings scaled by ``sqrt(d_model)``, plus positions, dropout, layers and a final LayerNorm.

    Components are passed in; :func:`structattn.encoders.build_encoder` wires them from a config and a plan.

    Args:
        embedding: token embedding (``padding_idx`` 0).
        positions: position module (``forward(n) -> (n, d_model)``) or ``None`` for structure-only models.
        layers: the encoder layers.
        dropout: embedding dropout.
        structure_names: names of the structures the layers read (checked at call time).

    Shapes:
        input_ids (b, n) long, token_mask (b, n) bool, structures name -> batched Structure over (b, n);
        returns :class:`EncoderOutput` with hidden (b, n, d_model).
    """

    def __init__(
        self,
        embedding: nn.Embedding,
        positions: nn.Module | None,
        layers: list[EncoderLayer],
        dropout: float,
        structure_names: set[str],
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.positions = positions
        self.layers = nn.ModuleList(layers)
        self.dropout = Dropout(dropout)
        self.final_norm = nn.LayerNorm(embedding.embedding_dim)
        self.structure_names = frozenset(structure_names)

    @property
    def d_model(self) -> int:
        return self.embedding.embedding_dim

    def forward(
        self,
        input_ids: torch.Tensor,
        token_mask: torch.Tensor,
        structures: dict[str, Structure] | None = None,
        *,
        return_weights: bool = False,
        return_bias: bool = False,
        return_attention: bool | None = None,
    ) -> EncoderOutput:
        """``return_weights``: also return each layer's attention weights; ``return_bias``: the learned bias
        tables. ``return_attention`` is the deprecated name of ``return_weights``."""
        return_weights = renamed_flag(return_weights, return_attention)
        named = self._structures(token_mask, structures or {})
        x = self.embedding(input_ids) * math.sqrt(self.d_model)  # (b, n, d_model)
        if self.positions is not None:
            x = x + self.positions(input_ids.shape[1])
        x = self.dropout(x)
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, named, return_weights)
            attentions.append(weights)
        x = self.final_norm(x) * token_mask[..., None]
        return EncoderOutput(
            hidden=x,
            attentions=attentions if return_weights else None,
            bias_tables=self.bias_tables() if return_bias else None,
        )

    def learned_quantities(self) -> list[dict[str, list[LearnedQuantity]]]:
        """Per layer, its head groups' learned quantities by group label (empty dicts for layers without any)."""
        return [layer.attention.learned_quantities() for layer in self.layers]

    def bias_tables(self) -> list[dict[str, torch.Tensor]]:
        """Per layer, the learned bias tables of its head groups (empty dicts for layers without one)."""
        return [layer.attention.bias_tables() for layer in self.layers]

    def _structures(self, token_mask: torch.Tensor, structures: dict[str, Structure]) -> dict[str | None, Structure]:
        missing = sorted(self.structure_names - set(structures))
        if missing:
            raise ValueError(f"the encoder reads structure(s) {missing}, the batch carries {sorted(structures)}")
        for name in self.structure_names:
            mask = structures[name].token_mask
            if mask is None or mask.shape != token_mask.shape:
                raise ValueError(
                    f"structure {name!r} covers tokens {None if mask is None else tuple(mask.shape)}, "
                    f"the input has {tuple(token_mask.shape)}"
                )
        named: dict[str | None, Structure] = {k: structures[k] for k in self.structure_names}
        named[None] = Structure(token_mask=token_mask)
        return named


def renamed_flag(return_weights: bool, return_attention: bool | None) -> bool:
    """``return_weights``, or the deprecated ``return_attention`` when a caller still passes it (warned)."""
    if return_attention is None:
        return return_weights
    warnings.warn("return_attention is deprecated: pass return_weights", DeprecationWarning, stacklevel=3)
    return return_weights or return_attention
