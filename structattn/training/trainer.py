"""The training loop: AdamW, warmup + inverse-sqrt schedule, clipping, bucketed batches, early stopping,
checkpoints with resume, data parallel through ``torch.distributed``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
from torch.nn.parallel import DistributedDataParallel

from structattn.encoders.batch import Batch
from structattn.encoders.model import TaskModel
from structattn.training.batching import LengthBucketSampler
from structattn.training.config import TrainConfig
from structattn.training.data import Example, make_batch
from structattn.training.distributed import Distributed, all_reduce_sum
from structattn.training.evaluation import evaluate, task_loss
from structattn.training.loop import (META_NOT_COMPARED, RESUMABLE_CHANGES, TrainingLoop, TrainResult, make_optimizer,
                                     stop_if_diverged)

__all__ = ["META_NOT_COMPARED", "RESUMABLE_CHANGES", "TrainResult", "Trainer", "make_optimizer", "stop_if_diverged"]


class Trainer(TrainingLoop):
    """Train a :class:`TaskModel` on encoded examples.

    Args:
        model: the model (moved to ``context.device``; wrapped in DDP when data parallel).
        config: optimisation settings.
        output: the task's output kind (``"sentence"``, ``"token"``, ``"pair"``), for label padding.
        seed: seed of the batch order (the caller seeds everything else with ``seed_everything``).
        context: this process's place among data-parallel processes.
        checkpoint_dir: where ``last.pt`` (resumable) and ``best.pt`` go, or ``None``; the metrics log
            (``log.jsonl``, ``log.csv``, ``tb/``) goes beside it (see :attr:`TrainingLoop.log_dir`).
        checkpoint_extra: stored in every checkpoint (``config``: operative gin config; ``meta``: how to
            rebuild the model).
        quiet: no progress bars.
        run_id: names the run in errors (divergence, resume mismatches).

    ``fit(train, dev, resume)``: with ``resume`` (a ``last.pt``), only ``max_steps``, ``eval_every``,
    ``patience`` and ``eval_batch_size`` may differ from the checkpoint's settings; any other difference
    (learning rate, seed, model, ``meta``) is refused with a ``ValueError`` listing checkpoint and config
    values, so a record never states settings that were not used (see :meth:`TrainingLoop.fit`).

    Raises (from :meth:`fit`):
        ValueError: the training loss or the gradient norm became NaN or infinite (names the step, the
            learning rate and the run), or a resumed checkpoint was trained with other settings.
    """

    def __init__(self, model: TaskModel, config: TrainConfig, output: str, *, seed: int = 0,
                 context: Distributed = Distributed(), checkpoint_dir: str | Path | None = None,
                 checkpoint_extra: dict[str, Any] | None = None, quiet: bool = False,
                 run_id: str | None = None) -> None:
        super().__init__(model.to(context.device), config, checkpoint_dir, checkpoint_extra)
        self.output, self.seed, self.context = output, seed, context
        self.quiet = quiet or not context.is_main
        self.writes_outputs = context.is_main  # checkpoints and the metrics log: the main process only
        self.run_id = run_id
        self.network = DistributedDataParallel(self.model) if context.enabled else self.model

    # -- the loop --------------------------------------------------------------------------------------
    def _sampler(self, train: Sequence[Example]) -> LengthBucketSampler:
        return LengthBucketSampler([len(e) for e in train], self.config.batch_size, batch_tokens=self.config.batch_tokens,
                                   seed=self.seed, rank=self.context.rank, world_size=self.context.world_size,
                                   ids=[e.id for e in train])

    def _train_on(self, examples: Sequence[Example]) -> None:
        self._step(make_batch(examples, self.output).to(self.context.device))

    def _step(self, batch: Batch) -> None:
        self.network.train()
        with self.autocast(self.context.device):
            logits = self.network(batch)
        self._update(task_loss(logits.float(), batch.labels))

    def _dev_row(self, dev: Sequence[Example]) -> tuple[dict[str, float], float]:
        """The history row (train loss summed over all processes) and dev accuracy, which picks the best."""
        scores = self.evaluate(dev)
        train_sums = all_reduce_sum(torch.tensor([self.loop["loss_sum"], self.loop["loss_count"]], dtype=torch.float64), self.context)
        train_loss = float(train_sums[0] / train_sums[1].clamp(min=1))
        self.loop["loss_sum"], self.loop["loss_count"] = 0.0, 0
        row = {"step": self.loop["step"], "train_loss": train_loss, "dev_loss": scores["loss"],
               "dev_accuracy": scores["accuracy"], "lr": self.scheduler.get_last_lr()[0]}
        return row, scores["accuracy"]

    # -- evaluation ------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, examples: Sequence[Example], desc: str = "eval") -> dict[str, float]:
        """Mean loss and accuracy over non-ignored targets (summed over all processes)."""
        return evaluate(self.model, examples, self.output, self.config.eval_batch_size, self.context,
                        quiet=self.quiet, desc=desc)

    # -- checkpoints -----------------------------------------------------------------------------------
    def _save(self, improved: bool) -> None:
        if self.context.is_main:
            self._save_checkpoints(improved)
