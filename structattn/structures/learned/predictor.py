"""The learned distance predictor: words -> predicted tree distances (a structural probe over a BiLSTM).

Hewitt & Manning (2019) read tree distances off frozen encoder states as ``||B (h_i - h_j)||^2``. Here the
states come from a small BiLSTM over word features (form, suffixes, shape) that is trained together with
``B``, so that the prediction needs words only (no parser, no POS tagger). The loss is the structural
probe's: per sentence ``sum_{i,j} |d(i, j) - ||B (h_i - h_j)||^2|| / n^2``, averaged over sentences.

Glossary: b batch, n tokens (words), f word features, e embedding dim, d state dim, r rank.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from einops import rearrange
from torch import nn

from structattn.structures.learned.words import FEATURES, WordFeatures

FORMAT = "structattn-learned-distance/1"


@dataclass(frozen=True)
class PredictorConfig:
    """Sizes of :class:`DistancePredictor`: embedding dim per feature, BiLSTM width (per direction) and
    layers, probe rank, dropout."""

    embedding_dim: int = 64
    hidden_dim: int = 128
    num_layers: int = 2
    rank: int = 64
    dropout: float = 0.3

    def __post_init__(self) -> None:
        for name in ("embedding_dim", "hidden_dim", "num_layers", "rank"):
            if getattr(self, name) < 1:
                raise ValueError(f"PredictorConfig: {name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"PredictorConfig: dropout must be in [0, 1), got {self.dropout}")


class DistancePredictor(nn.Module):
    """Predicted squared distances ``||B (h_i - h_j)||^2`` from a BiLSTM over word features.

    Args:
        features: the feature tables (see :class:`WordFeatures`), saved with the weights.
        config: sizes.

    Shapes:
        forward: ids (b, n, f), token_mask (b, n) -> distances (b, n, n), float32, 0 on the diagonal.
    """

    def __init__(self, features: WordFeatures, config: PredictorConfig = PredictorConfig()) -> None:
        super().__init__()
        self.features, self.config = features, config
        sizes = features.sizes()
        self.embeddings = nn.ModuleList(nn.Embedding(sizes[name], config.embedding_dim, padding_idx=0) for name in FEATURES)
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(config.embedding_dim * len(FEATURES), config.hidden_dim, config.num_layers,
                            batch_first=True, bidirectional=True, dropout=config.dropout if config.num_layers > 1 else 0.0)
        self.proj = nn.Linear(2 * config.hidden_dim, config.rank, bias=False)

    def states(self, ids: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        """Projected BiLSTM states ``B h``. Shapes: (b, n, f), (b, n) -> (b, n, r)."""
        x = torch.cat([emb(ids[..., k]) for k, emb in enumerate(self.embeddings)], dim=-1)  # (b, n, f*e)
        lengths = token_mask.sum(-1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.dropout(x), lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=ids.shape[1])  # (b, n, 2d)
        return self.proj(self.dropout(h))

    def forward(self, ids: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        t = self.states(ids, token_mask)  # (b, n, r)
        diff = rearrange(t, "b i r -> b i 1 r") - rearrange(t, "b j r -> b 1 j r")  # (b, n, n, r)
        return diff.pow(2).sum(-1)

    @torch.inference_mode()
    def predict(self, sentences: list[list[str]]) -> list[torch.Tensor]:
        """Predicted distances of each sentence (lists of words), cropped to its length: (n_k, n_k) each."""
        was_training = self.training
        self.eval()
        ids, token_mask = self.features.encode(sentences)
        out = self(ids, token_mask)
        self.train(was_training)
        return [out[k, : len(words), : len(words)] for k, words in enumerate(sentences)]

    def fingerprint(self) -> str:
        """SHA-256 of sizes, feature tables and weights (equal for equal models, whatever the file name)."""
        digest = hashlib.sha256(json.dumps([asdict(self.config), self.features.tables], sort_keys=True).encode())
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    def save(self, path: str | Path) -> Path:
        """Write weights, sizes and feature tables to ``path`` (one ``torch.save`` file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu() for k, v in self.state_dict().items()}
        torch.save({"format": FORMAT, "config": asdict(self.config), "features": self.features.tables, "state": state}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "DistancePredictor":
        """The predictor saved at ``path``, in eval mode.

        Raises:
            ValueError: the file is missing or is not a saved predictor.
        """
        path = Path(path).expanduser()
        if not path.is_file():
            raise ValueError(f"learned distance predictor file {str(path)!r} does not exist; train one with "
                             "structattn.structures.learned.train_predictor(...) and .save(path) "
                             "(benchmarks/parser_free.py does both)")
        try:
            saved = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # pickle / zip errors of every kind
            raise ValueError(f"{str(path)!r} is not a saved distance predictor: {err}") from None
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
            raise ValueError(f"{str(path)!r} is not a saved distance predictor (format {FORMAT!r} expected)")
        model = cls(WordFeatures(saved["features"]), PredictorConfig(**saved["config"]))
        model.load_state_dict(saved["state"])
        return model.eval()
