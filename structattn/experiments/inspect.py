"""What a trained model shows about its attention: learned bias tables and one sentence's attention maps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from structattn.encoders.model import TaskModel
from structattn.structures.alignment import align_to_subwords
from structattn.structures.providers.base import get_provider
from structattn.training.data import Example, make_batch

if TYPE_CHECKING:
    from structattn.experiments.runners.encoder import PreparedData


def bias_records(model: TaskModel) -> list[dict[str, Any]]:
    """Every learned quantity of every variant (``StructuredAttention.learned_quantities()``: bias tables,
    scales, sigmas), as ``{"layer", "group", "name", "learned", "labels", "values": values[head][column]}``."""
    out = []
    for layer, block in enumerate(model.encoder.layers):
        attention = block.attention
        for group, module in zip(attention.groups, attention.variants):
            for quantity in module.learned_quantities():
                out.append({"layer": layer, "group": group.label, "name": quantity.name, "learned": quantity.learned,
                            "labels": list(quantity.labels), "values": quantity.values.float().cpu().tolist()})
    return out


def pick_sentence(examples: Sequence[Example], shortest: int = 6, longest: int = 14) -> int:
    """Index of the first example with a readable length (else the shortest one)."""
    for k, e in enumerate(examples):
        if shortest <= len(e) <= longest:
            return k
    return min(range(len(examples)), key=lambda k: len(examples[k]))


@torch.no_grad()
def heatmap_record(model: TaskModel, data: "PreparedData", examples: Sequence[Example],
                   device: torch.device | str = "cpu") -> dict[str, Any]:
    """Head-averaged attention of every layer on one test sentence, with its gold dependency arcs.

    Returns:
        ``{"id", "tokens", "layers": [n x n per layer], "gold": [[i, j], ...], "gold_source"}``; ``gold``
        lists the off-diagonal adjacent pairs of the gold tree (or of the first structure the run reads).
    """
    k = pick_sentence(examples)
    example, item = examples[k], data.items["test"][k]
    model.eval()
    batch = make_batch([example], data.task.output).to(device)
    _, out = model.run(batch, return_weights=True)
    layers = [w[0].float().mean(0).cpu() for w in out.attentions]  # (n, n) each
    inputs = data.task.inputs(item)
    labels = getattr(data.vocab, "token_labels", None)  # a vocabulary whose ids include special tokens
    if labels is not None:
        tokens = labels(example.input_ids)
    else:
        tokens = [p for w in inputs for p in data.vocab.pieces(w)] if example.word_ids is not None else inputs
    gold, source = _gold(item, example)
    pairs = [] if gold is None else [[i, j] for i, j in torch.nonzero(gold).tolist() if i != j]
    return {"id": item.id, "tokens": tokens, "layers": [[[round(x, 4) for x in row] for row in w.tolist()] for w in layers],
            "gold": pairs, "gold_source": source}


def _gold(item: Any, example: Example) -> tuple[torch.Tensor | None, str | None]:
    if getattr(item, "heads", None) is not None:
        structure = get_provider("dependency")(item)
        if example.word_ids is not None:
            structure = align_to_subwords(structure, example.word_ids)
        return structure.dense_adjacency(), "dependency"
    for name, structure in sorted(example.structures.items()):
        return structure.dense_adjacency(), name
    return None, None
