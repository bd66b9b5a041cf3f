"""``learned_dependency``: the tree predicted from words by a trained :class:`DistancePredictor` (no parser)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from structattn.structures._checks import int_option
from structattn.structures.learned.predictor import DistancePredictor
from structattn.structures.learned.training import predicted_heads
from structattn.structures.providers.base import Item, StructureProvider, register_provider
from structattn.structures.providers.dependency import DependencyProvider
from structattn.structures.sentence import Document, Sentence
from structattn.structures.structure import Structure


@register_provider("learned_dependency")
class LearnedDependencyProvider(StructureProvider):
    """Tree distance and adjacency of the minimum spanning tree of distances predicted from the words alone.

    The predictor (see :mod:`structattn.structures.learned.predictor`) was trained on parser or gold trees;
    this provider lets a model trained with such structure run where no parser is available. The output has
    the fields of ``dependency`` and equals ``dependency`` run on the decoded heads (a :class:`Document` gives
    one tree per sentence, a forest). Any annotation the item carries (heads included) is ignored.

    Args:
        path: a file written by :meth:`DistancePredictor.save`. The model's fingerprint (SHA-256 of its weights, sizes and
            feature tables) is part of :meth:`options`, so a
            structure cache never serves trees of another model saved under the same name.
        batch_size: sentences per predictor call.

    Raises:
        ValueError: the file is missing or is not a saved predictor.
    """

    requires = ()
    options_ignored = ("batch_size",)  # the fingerprint identifies the model; batching does not change trees

    def __init__(self, path: str | Path, batch_size: int = 64) -> None:
        batch_size = int_option(batch_size, "batch_size", "provider 'learned_dependency'", minimum=1)
        self.path, self.batch_size = str(path), batch_size
        self.model = DistancePredictor.load(path)
        self.sha256 = self.model.fingerprint()
        self._tree = DependencyProvider()

    def options(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256}

    def decoded(self, items: list[Item]) -> list[Item]:
        """Copies of ``items`` holding only their words, ids and the predicted heads."""
        sentences = [s for item in items for s in _sentences(item)]
        with torch.no_grad():
            heads = iter(predicted_heads(self.model, sentences, self.batch_size))
        out: list[Item] = []
        for item in items:
            trees = [Sentence(list(s.words), heads=next(heads), id=s.id) for s in _sentences(item)]
            out.append(Document(trees, id=item.id) if isinstance(item, Document) else trees[0])
        return out

    def compute(self, items: list[Item]) -> Structure:
        return self._tree.compute(self.decoded(items))


def _sentences(item: Item) -> list[Sentence]:
    return list(item.sentences) if isinstance(item, Document) else [item]
