"""Training loop of translation models: AdamW, warmup + inverse-sqrt schedule, label-smoothed cross-entropy,
clipping, length-bucketed batches, dev evaluation with early stopping, checkpoints with resume.

The loop of :class:`~structattn.training.loop.TrainingLoop` (shared with ``Trainer``) for a
:class:`Seq2SeqModel` (whose batches and loss differ); one process (no data parallel). Best weights are picked on ``dev_score`` (e.g. dev BLEU of
greedy decoding) when given, else on teacher-forced dev token accuracy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from structattn.seq2seq.collate import PairExample, pair_batch
from structattn.seq2seq.model import Seq2SeqModel
from structattn.training.batching import LengthBucketSampler
from structattn.training.config import TrainConfig
from structattn.training.loop import TrainingLoop


class Seq2SeqTrainer(TrainingLoop):
    """Train a :class:`Seq2SeqModel` on encoded sentence pairs.

    Args:
        model: the model (moved to ``device``).
        config: optimisation settings (``TrainConfig``; ``patience`` counts evaluations of ``dev_score``).
        label_smoothing: of the token cross-entropy.
        seed: seed of the batch order (seed everything else with ``seed_everything``).
        device: where to train.
        dev_score: ``model -> float`` (higher is better), evaluated every ``eval_every`` steps; ``None``: dev
            token accuracy.
        checkpoint_dir: where ``last.pt`` (resumable) and ``best.pt`` go, or ``None``; the metrics log
            (``log.jsonl``, ``log.csv``, ``tb/``) goes beside it (see :attr:`TrainingLoop.log_dir`).
        checkpoint_extra: stored in every checkpoint (``config``, ``meta``).
        quiet: no progress bars.
        run_id: names the run in errors and in the :class:`~structattn.training.deadline.TimeLimitReached` a
            time limit raises (``compare`` reports which run stopped where).

    ``fit(train, dev, resume)``: as for ``Trainer``, a ``last.pt`` trained with other settings (anything but
    ``max_steps``, ``eval_every``, ``patience``, ``eval_batch_size``: learning rate, seed, ``meta``) is refused
    with a ``ValueError`` listing checkpoint and config values (see :meth:`TrainingLoop.fit`).
    """

    def __init__(self, model: Seq2SeqModel, config: TrainConfig, *, label_smoothing: float = 0.1, seed: int = 0,
                 device: torch.device | str = "cpu", dev_score: Callable[[Seq2SeqModel], float] | None = None,
                 checkpoint_dir: str | Path | None = None, checkpoint_extra: dict[str, Any] | None = None,
                 quiet: bool = False, run_id: str | None = None) -> None:
        super().__init__(model.to(device), config, checkpoint_dir, checkpoint_extra)
        self.label_smoothing, self.seed, self.device = label_smoothing, seed, device
        self.dev_score, self.quiet, self.run_id = dev_score, quiet, run_id

    def _sampler(self, train: Sequence[PairExample]) -> LengthBucketSampler:
        lengths = [len(e) + len(e.target_ids) for e in train]
        return LengthBucketSampler(lengths, self.config.batch_size, batch_tokens=self.config.batch_tokens, seed=self.seed,
                                   ids=[e.id for e in train])

    def _train_on(self, examples: Sequence[PairExample]) -> None:
        self.model.train()
        batch = pair_batch(examples, self.model.bos_id, self.model.eos_id).to(self.device)
        with self.autocast(self.device):
            if self.precision == "bf16":  # the fast path: padded target rows skip the vocabulary projection
                loss = self.model.loss(batch, self.label_smoothing, skip_padding=True)
            else:
                loss = self.model.loss(batch, self.label_smoothing)
        self._update(loss.float())

    def _dev_row(self, dev: Sequence[PairExample]) -> tuple[dict[str, float], float]:
        """The history row; ``dev_score`` (when given) or dev token accuracy picks the best weights."""
        scores = self.evaluate(dev)
        row = {"step": self.loop["step"], "train_loss": self.loop["loss_sum"] / max(self.loop["loss_count"], 1),
               "dev_loss": scores["loss"], "dev_accuracy": scores["accuracy"], "lr": self.scheduler.get_last_lr()[0]}
        self.loop["loss_sum"], self.loop["loss_count"] = 0.0, 0
        if self.dev_score is not None:
            row["dev_score"] = float(self.dev_score(self.model))
        return row, row.get("dev_score", row["dev_accuracy"])

    def evaluate(self, examples: Sequence[PairExample]) -> dict[str, float]:
        """Teacher-forced mean token loss (no label smoothing) and next-token accuracy over real targets."""
        return teacher_forced_scores(self.model, examples, self.config.eval_batch_size, self.device)


@torch.no_grad()
def teacher_forced_scores(model: Seq2SeqModel, examples: Sequence[PairExample], batch_size: int = 64,
                          device: torch.device | str = "cpu") -> dict[str, float]:
    """Teacher-forced mean token loss (no label smoothing) and next-token accuracy over the real target tokens
    of ``examples`` (in batches of similar length); the model is put in eval mode."""
    model.eval()
    loss_sum, right, total = 0.0, 0, 0
    order = sorted(range(len(examples)), key=lambda i: len(examples[i]))
    for start in range(0, len(order), batch_size):
        chunk = [examples[i] for i in order[start:start + batch_size]]
        batch = pair_batch(chunk, model.bos_id, model.eos_id).to(device)
        logits = model(batch).float()
        real = batch.target_mask
        loss_sum += float(torch.nn.functional.cross_entropy(logits[real], batch.target_out[real], reduction="sum"))
        right += int((logits.argmax(-1) == batch.target_out)[real].sum())
        total += int(real.sum())
    return {"loss": loss_sum / max(total, 1), "accuracy": right / max(total, 1)}
