"""What a trained model shows about its attention: learned bias tables and one sentence's attention maps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from structattn.encoders.model import TaskModel
from structattn.encoders.self_attention import learned_bias
from structattn.structures.alignment import align_to_subwords
from structattn.structures.providers.base import get_provider
from structattn.training.data import Example, make_batch

if TYPE_CHECKING:
    from structattn.experiments.run import PreparedData


def bias_records(model: TaskModel) -> list[dict[str, Any]]:
    """Every learned bias table (see :func:`learned_bias`), as ``values[head][bucket]``.

    Bucket names come from the variant's ``bucket_labels()`` when it has one (else ``"0", "1", ...``).
    """
    out = []
    for layer, block in enumerate(model.encoder.layers):
        attention = block.attention
        for group, module in zip(attention.groups, attention.variants):
            table = learned_bias(module)
            if table is None:
                continue
            values = table.float().cpu()
            labels = [str(x) for x in module.bucket_labels()] if hasattr(module, "bucket_labels") else None
            values = _per_head(values, len(labels) if labels else values.shape[-1])
            labels = labels or [str(k) for k in range(values.shape[-1])]
            out.append({"layer": layer, "group": group.label, "labels": labels, "values": values.tolist()})
    return out


def _per_head(values: torch.Tensor, buckets: int) -> torch.Tensor:
    """``(heads, buckets)`` from a table stored as ``(buckets,)``, ``(..., buckets)`` or ``(buckets, heads)``."""
    if values.shape[-1] == buckets:
        return values.reshape(-1, buckets)
    if values.shape[0] == buckets:
        return values.reshape(buckets, -1).T
    raise ValueError(f"bias table of shape {tuple(values.shape)} does not match {buckets} bucket labels")


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
    _, out = model.run(batch, return_attention=True)
    layers = [w[0].float().mean(0).cpu() for w in out.attentions]  # (n, n) each
    inputs = data.task.inputs(item)
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
