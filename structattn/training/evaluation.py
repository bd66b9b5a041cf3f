"""Loss and accuracy shared by every head: cross-entropy and argmax accuracy over non-ignored targets."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from structattn.encoders.model import TaskModel
from structattn.progress import progress_bar
from structattn.tasks.base import IGNORE
from structattn.training.batching import LengthBucketSampler
from structattn.training.data import Example, make_batch
from structattn.training.distributed import Distributed, all_reduce_sum


def task_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over non-ignored targets (the class axis is the last axis of ``logits``)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE)


@torch.no_grad()
def evaluate(model: TaskModel, examples: Sequence[Example], output: str, batch_size: int,
             context: Distributed = Distributed(), quiet: bool = False, desc: str = "eval") -> dict[str, float]:
    """Mean loss and argmax accuracy over non-ignored targets of ``examples`` (rank-sharded, summed)."""
    model.eval()
    sampler = LengthBucketSampler([len(e) for e in examples], batch_size, shuffle=False,
                                  rank=context.rank, world_size=context.world_size)
    sums = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, targets
    for idx in progress_bar(sampler.batches(), quiet=quiet, desc=desc, leave=False):
        batch = make_batch([examples[i] for i in idx], output).to(context.device)
        logits = model(batch)
        kept = batch.labels != IGNORE
        count = int(kept.sum())
        sums += torch.tensor([float(task_loss(logits, batch.labels)) * count,
                              float(((logits.argmax(-1) == batch.labels) & kept).sum()), count], dtype=torch.float64)
    sums = all_reduce_sum(sums, context)
    total = max(float(sums[2]), 1.0)
    return {"loss": float(sums[0]) / total, "accuracy": float(sums[1]) / total}


@torch.no_grad()
def item_accuracy(model: TaskModel, examples: Sequence[Example], output: str, batch_size: int,
                  device: torch.device | str = "cpu") -> tuple[list[int], list[int]]:
    """Per example, in input order: the number of non-ignored targets predicted right, and of non-ignored
    targets (what a paired significance test resamples; their sums give :func:`evaluate`'s accuracy)."""
    model.eval()
    correct, total = [0] * len(examples), [0] * len(examples)
    sampler = LengthBucketSampler([len(e) for e in examples], batch_size, shuffle=False)
    for idx in sampler.batches():
        batch = make_batch([examples[i] for i in idx], output).to(device)
        kept = batch.labels != IGNORE
        right = (model(batch).argmax(-1) == batch.labels) & kept
        for row, i in enumerate(idx):
            correct[i], total[i] = int(right[row].sum()), int(kept[row].sum())
    return correct, total
