"""Training loop of translation models: AdamW, warmup + inverse-sqrt schedule, label-smoothed cross-entropy,
clipping, length-bucketed batches, dev evaluation with early stopping, checkpoints with resume.

The same loop as :class:`~structattn.training.trainer.Trainer` for a :class:`Seq2SeqModel` (whose batches and
loss differ); one process (no data parallel). Best weights are picked on ``dev_score`` (e.g. dev BLEU of
greedy decoding) when given, else on teacher-forced dev token accuracy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from tqdm.auto import tqdm

from structattn.seq2seq.collate import PairExample, pair_batch
from structattn.seq2seq.model import Seq2SeqModel
from structattn.training.batching import LengthBucketSampler
from structattn.training.checkpoints import load_checkpoint, save_checkpoint
from structattn.training.config import TrainConfig
from structattn.training.param_groups import parameter_groups
from structattn.training.schedule import make_scheduler
from structattn.training.seeding import rng_state, set_rng_state
from structattn.training.trainer import TrainResult, stop_if_diverged


class Seq2SeqTrainer:
    """Train a :class:`Seq2SeqModel` on encoded sentence pairs.

    Args:
        model: the model (moved to ``device``).
        config: optimisation settings (``TrainConfig``; ``patience`` counts evaluations of ``dev_score``).
        label_smoothing: of the token cross-entropy.
        seed: seed of the batch order (seed everything else with ``seed_everything``).
        device: where to train.
        dev_score: ``model -> float`` (higher is better), evaluated every ``eval_every`` steps; ``None``: dev
            token accuracy.
        checkpoint_dir: where ``last.pt`` (resumable) and ``best.pt`` go, or ``None``.
        checkpoint_extra: stored in every checkpoint (``config``, ``meta``).
        quiet: no progress bars.
    """

    def __init__(self, model: Seq2SeqModel, config: TrainConfig, *, label_smoothing: float = 0.1, seed: int = 0,
                 device: torch.device | str = "cpu", dev_score: Callable[[Seq2SeqModel], float] | None = None,
                 checkpoint_dir: str | Path | None = None, checkpoint_extra: dict[str, Any] | None = None,
                 quiet: bool = False) -> None:
        self.model = model.to(device)
        self.config, self.label_smoothing, self.seed, self.device = config, label_smoothing, seed, device
        self.dev_score, self.quiet = dev_score, quiet
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_extra = checkpoint_extra or {}
        self.optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr)
        self.scheduler = make_scheduler(self.optimizer, config.warmup_steps)
        self.loop: dict[str, Any] = {"step": 0, "epoch": 0, "position": 0, "bad_evals": 0, "loss_sum": 0.0, "loss_count": 0}
        self.result = TrainResult()
        self.best_state: dict[str, torch.Tensor] | None = None

    def fit(self, train: Sequence[PairExample], dev: Sequence[PairExample],
            resume: str | Path | None = None) -> TrainResult:
        """Train until ``max_steps`` or early stopping; the model ends with the best dev weights."""
        if resume is not None:
            self._restore(load_checkpoint(resume))
        lengths = [len(e) + len(e.target_ids) for e in train]
        sampler = LengthBucketSampler(lengths, self.config.batch_size, seed=self.seed)
        bar = tqdm(total=self.config.max_steps, initial=self.loop["step"], desc="train", disable=self.quiet)
        stop = self.loop["step"] >= self.config.max_steps
        while not stop:
            batches = sampler.batches(self.loop["epoch"])
            while self.loop["position"] < len(batches) and not stop:
                self._step([train[i] for i in batches[self.loop["position"]]])
                self.loop["position"] += 1
                bar.update(1)
                if self.loop["step"] % self.config.eval_every == 0 or self.loop["step"] >= self.config.max_steps:
                    stop = self._evaluate_and_save(dev, bar)
                stop = stop or self.loop["step"] >= self.config.max_steps
            if self.loop["position"] >= len(batches):
                self.loop["epoch"], self.loop["position"] = self.loop["epoch"] + 1, 0
        bar.close()
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        self.result.steps = self.loop["step"]
        return self.result

    def _step(self, examples: Sequence[PairExample]) -> None:
        self.model.train()
        batch = pair_batch(examples, self.model.bos_id, self.model.eos_id).to(self.device)
        loss = self.model.loss(batch, self.label_smoothing)
        where = {"step": self.loop["step"] + 1, "lr": self.scheduler.get_last_lr()[0]}
        stop_if_diverged("training loss", loss, **where)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.clip_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
            stop_if_diverged("gradient norm", norm, **where)
        self.optimizer.step()
        self.scheduler.step()
        self.loop["step"] += 1
        self.loop["loss_sum"] += float(loss.detach())
        self.loop["loss_count"] += 1

    def _evaluate_and_save(self, dev: Sequence[PairExample], bar: tqdm) -> bool:
        """Evaluate, keep the best weights, checkpoint; True when patience has run out."""
        scores = self.evaluate(dev)
        row = {"step": self.loop["step"], "train_loss": self.loop["loss_sum"] / max(self.loop["loss_count"], 1),
               "dev_loss": scores["loss"], "dev_accuracy": scores["accuracy"], "lr": self.scheduler.get_last_lr()[0]}
        self.loop["loss_sum"], self.loop["loss_count"] = 0.0, 0
        if self.dev_score is not None:
            row["dev_score"] = float(self.dev_score(self.model))
        value = row.get("dev_score", row["dev_accuracy"])
        self.result.history.append(row)
        improved = value > self.result.best_metric
        if improved:
            self.result.best_metric, self.result.best_step = value, self.loop["step"]
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.loop["bad_evals"] = 0
        else:
            self.loop["bad_evals"] += 1
        bar.set_postfix(loss=f"{row['train_loss']:.3f}", dev=f"{value:.3f}", best=f"{self.result.best_metric:.3f}")
        self._save(improved)
        self.result.stopped_early = 0 < self.config.patience <= self.loop["bad_evals"]
        return self.result.stopped_early

    @torch.no_grad()
    def evaluate(self, examples: Sequence[PairExample]) -> dict[str, float]:
        """Teacher-forced mean token loss (no label smoothing) and next-token accuracy over real targets."""
        self.model.eval()
        loss_sum, right, total = 0.0, 0, 0
        order = sorted(range(len(examples)), key=lambda i: len(examples[i]))
        for start in range(0, len(order), self.config.eval_batch_size):
            chunk = [examples[i] for i in order[start:start + self.config.eval_batch_size]]
            batch = pair_batch(chunk, self.model.bos_id, self.model.eos_id).to(self.device)
            logits = self.model(batch).float()
            real = batch.target_mask
            loss_sum += float(torch.nn.functional.cross_entropy(logits[real], batch.target_out[real], reduction="sum"))
            right += int((logits.argmax(-1) == batch.target_out)[real].sum())
            total += int(real.sum())
        return {"loss": loss_sum / max(total, 1), "accuracy": right / max(total, 1)}

    def _save(self, improved: bool) -> None:
        if self.checkpoint_dir is None:
            return
        loop = {**self.loop, "history": self.result.history, "best_step": self.result.best_step,
                "best_metric": self.result.best_metric}
        save_checkpoint(self.checkpoint_dir / "last.pt", model=self.model.state_dict(), best_model=self.best_state,
                        optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(), loop=loop,
                        rng=rng_state(), train_config=self.config.to_dict(), **self.checkpoint_extra)
        if improved:
            save_checkpoint(self.checkpoint_dir / "best.pt", model=self.best_state, loop=loop, **self.checkpoint_extra)

    def _restore(self, data: dict[str, Any]) -> None:
        if "optimizer" not in data:
            raise ValueError("this checkpoint holds only model weights (best.pt?); resume from last.pt")
        self.model.load_state_dict(data["model"])
        self.optimizer.load_state_dict(data["optimizer"])
        self.scheduler.load_state_dict(data["scheduler"])
        loop = dict(data["loop"])
        self.result = TrainResult(list(loop.pop("history")), loop.pop("best_step"), loop.pop("best_metric"))
        self.loop.update(loop)
        self.best_state = data.get("best_model")
        set_rng_state(data["rng"])
