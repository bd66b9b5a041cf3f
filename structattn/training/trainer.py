"""The training loop: AdamW, warmup + inverse-sqrt schedule, clipping, bucketed batches, early stopping,
checkpoints with resume, data parallel through ``torch.distributed``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from structattn.encoders.batch import Batch
from structattn.encoders.model import TaskModel
from structattn.training.batching import LengthBucketSampler
from structattn.training.checkpoints import load_checkpoint, save_checkpoint
from structattn.training.config import TrainConfig
from structattn.training.data import Example, make_batch
from structattn.training.distributed import Distributed, all_reduce_sum
from structattn.training.evaluation import evaluate, task_loss
from structattn.training.param_groups import parameter_groups
from structattn.training.schedule import make_scheduler
from structattn.training.seeding import rng_state, set_rng_state


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns; ``history`` has one row per evaluation."""

    history: list[dict[str, float]] = field(default_factory=list)
    best_step: int = 0
    best_metric: float = -math.inf
    steps: int = 0
    stopped_early: bool = False


#: settings a resumed run may change (a longer run, other evaluation cadence); any other differs -> refused
RESUMABLE_CHANGES = frozenset({"max_steps", "eval_every", "patience", "eval_batch_size"})
#: ``meta`` entries that describe the circumstances of a run rather than what it trains
META_NOT_COMPARED = frozenset({"run_id", "provenance", "plugins"})


def stop_if_diverged(what: str, value: torch.Tensor, *, step: int, lr: float, run_id: str | None = None) -> None:
    """Stop a diverged run (NaN / inf ``value``) at the step it happened, instead of finishing at chance level.

    Raises:
        ValueError: ``"run 000_depth_full_s0: training loss became nan at step 137 (lr 3.0e-03); ..."``.
    """
    value = value.detach()
    if bool(torch.isfinite(value).all()):
        return
    who = f"run {run_id}: " if run_id else ""
    raise ValueError(f"{who}{what} became {float(value):g} at step {step} (lr {lr:.1e}); "
                     "lower training.lr or check the data")


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW over ``model.parameter_groups(config)`` when the model defines it (e.g. HF fine-tuning: other
    learning rates for pretrained and new parameters), else over :func:`parameter_groups` (decay on weight
    matrices only, see :class:`TrainConfig`)."""
    custom = getattr(model, "parameter_groups", None)
    groups = custom(config) if callable(custom) else parameter_groups(model, config.weight_decay)
    return torch.optim.AdamW(groups, lr=config.lr)


class Trainer:
    """Train a :class:`TaskModel` on encoded examples.

    Args:
        model: the model (moved to ``context.device``; wrapped in DDP when data parallel).
        config: optimisation settings.
        output: the task's output kind (``"sentence"``, ``"token"``, ``"pair"``), for label padding.
        seed: seed of the batch order (the caller seeds everything else with ``seed_everything``).
        context: this process's place among data-parallel processes.
        checkpoint_dir: where ``last.pt`` (resumable) and ``best.pt`` go, or ``None``.
        checkpoint_extra: stored in every checkpoint (``config``: operative gin config; ``meta``: how to
            rebuild the model).
        quiet: no progress bars.
        run_id: names the run in errors (divergence, resume mismatches).

    Raises (from :meth:`fit`):
        ValueError: the training loss or the gradient norm became NaN or infinite (names the step, the
            learning rate and the run), or a resumed checkpoint was trained with other settings.
    """

    def __init__(self, model: TaskModel, config: TrainConfig, output: str, *, seed: int = 0,
                 context: Distributed = Distributed(), checkpoint_dir: str | Path | None = None,
                 checkpoint_extra: dict[str, Any] | None = None, quiet: bool = False,
                 run_id: str | None = None) -> None:
        self.model = model.to(context.device)
        self.config, self.output, self.seed, self.context = config, output, seed, context
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_extra = checkpoint_extra or {}
        self.quiet = quiet or not context.is_main
        self.run_id = run_id
        self.optimizer = make_optimizer(model, config)
        self.scheduler = make_scheduler(self.optimizer, config.warmup_steps)
        self.network = DistributedDataParallel(self.model) if context.enabled else self.model
        self.loop: dict[str, Any] = {"step": 0, "epoch": 0, "position": 0, "bad_evals": 0, "loss_sum": 0.0,
                                     "loss_count": 0}
        self.result = TrainResult()
        self.best_state: dict[str, torch.Tensor] | None = None

    # -- the loop --------------------------------------------------------------------------------------
    def fit(self, train: Sequence[Example], dev: Sequence[Example], resume: str | Path | None = None) -> TrainResult:
        """Train until ``max_steps`` or early stopping; the model ends with the best dev weights.

        ``resume``: a ``last.pt`` to continue from. Only ``max_steps``, ``eval_every``, ``patience`` and
        ``eval_batch_size`` may differ from the checkpoint's settings; any other difference (learning rate,
        seed, model, ``meta``) is refused with a ``ValueError`` listing checkpoint and config values, so a
        record never states settings that were not used.
        """
        if resume is not None:
            data = load_checkpoint(resume)
            self._check_resumable(data, resume)
            self._restore(data)
        sampler = LengthBucketSampler([len(e) for e in train], self.config.batch_size, seed=self.seed,
                                      rank=self.context.rank, world_size=self.context.world_size)
        bar = tqdm(total=self.config.max_steps, initial=self.loop["step"], desc="train", disable=self.quiet)
        stop = self.loop["step"] >= self.config.max_steps
        while not stop:
            batches = sampler.batches(self.loop["epoch"])
            while self.loop["position"] < len(batches) and not stop:
                batch = make_batch([train[i] for i in batches[self.loop["position"]]], self.output)
                self.loop["position"] += 1
                self._step(batch.to(self.context.device))
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

    def _step(self, batch: Batch) -> None:
        self.network.train()
        loss = task_loss(self.network(batch), batch.labels)
        self.optimizer.zero_grad(set_to_none=True)
        self._check_finite("training loss", loss)
        loss.backward()
        if self.config.clip_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
            self._check_finite("gradient norm", norm)
        self.optimizer.step()
        self.scheduler.step()
        self.loop["step"] += 1
        self.loop["loss_sum"] += float(loss.detach())
        self.loop["loss_count"] += 1

    def _check_finite(self, what: str, value: torch.Tensor) -> None:
        stop_if_diverged(what, value, step=self.loop["step"] + 1, lr=self.scheduler.get_last_lr()[0],
                         run_id=self.run_id)

    def _evaluate_and_save(self, dev: Sequence[Example], bar: tqdm) -> bool:
        """Evaluate, keep the best weights, checkpoint; True when patience has run out."""
        scores = self.evaluate(dev)
        train_sums = all_reduce_sum(torch.tensor([self.loop["loss_sum"], self.loop["loss_count"]], dtype=torch.float64), self.context)
        train_loss = float(train_sums[0] / train_sums[1].clamp(min=1))
        self.loop["loss_sum"], self.loop["loss_count"] = 0.0, 0
        row = {"step": self.loop["step"], "train_loss": train_loss, "dev_loss": scores["loss"],
               "dev_accuracy": scores["accuracy"], "lr": self.scheduler.get_last_lr()[0]}
        self.result.history.append(row)
        improved = scores["accuracy"] > self.result.best_metric
        if improved:
            self.result.best_metric, self.result.best_step = scores["accuracy"], self.loop["step"]
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.loop["bad_evals"] = 0
        else:
            self.loop["bad_evals"] += 1
        bar.set_postfix(loss=f"{train_loss:.3f}", dev=f"{scores['accuracy']:.3f}", best=f"{self.result.best_metric:.3f}")
        self._save(improved)
        self.result.stopped_early = 0 < self.config.patience <= self.loop["bad_evals"]
        return self.result.stopped_early

    # -- evaluation ------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, examples: Sequence[Example], desc: str = "eval") -> dict[str, float]:
        """Mean loss and accuracy over non-ignored targets (summed over all processes)."""
        return evaluate(self.model, examples, self.output, self.config.eval_batch_size, self.context,
                        quiet=self.quiet, desc=desc)

    # -- checkpoints -----------------------------------------------------------------------------------
    def _save(self, improved: bool) -> None:
        if self.checkpoint_dir is None or not self.context.is_main:
            return
        loop = {**self.loop, "history": self.result.history, "best_step": self.result.best_step,
                "best_metric": self.result.best_metric}
        save_checkpoint(self.checkpoint_dir / "last.pt", model=self.model.state_dict(), best_model=self.best_state,
                        optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(), loop=loop,
                        rng=rng_state(), train_config=self.config.to_dict(), seed=self.seed, **self.checkpoint_extra)
        if improved:
            save_checkpoint(self.checkpoint_dir / "best.pt", model=self.best_state, loop=loop, **self.checkpoint_extra)

    def _check_resumable(self, data: dict[str, Any], path: str | Path) -> None:
        """Refuse to resume a checkpoint trained with other settings than this trainer's (see :meth:`fit`)."""
        if "optimizer" not in data:
            raise ValueError("this checkpoint holds only model weights (best.pt?); resume from last.pt")
        differ = []
        saved = data.get("train_config") or {}
        for name, value in self.config.to_dict().items():
            if name not in RESUMABLE_CHANGES and name in saved and saved[name] != value:
                differ.append(f"training.{name}: checkpoint {saved[name]!r}, config {value!r}")
        if "seed" in data and data["seed"] != self.seed:
            differ.append(f"seed: checkpoint {data['seed']!r}, config {self.seed!r}")
        old, new = data.get("meta") or {}, self.checkpoint_extra.get("meta") or {}
        for key in sorted((set(old) & set(new)) - META_NOT_COMPARED):
            if old[key] != new[key] and not (key == "seed" and "seed" in data):
                differ.append(f"{key}: checkpoint {_short(old[key])}, config {_short(new[key])}")
        if differ:
            who = f"run {self.run_id}: " if self.run_id else ""
            raise ValueError(f"{who}cannot resume from {str(path)!r}: it was trained with other settings ("
                             + "; ".join(differ) + "); use the checkpoint's settings, or train into a new folder")

    def _restore(self, data: dict[str, Any]) -> None:
        self.model.load_state_dict(data["model"])
        self.optimizer.load_state_dict(data["optimizer"])
        self.scheduler.load_state_dict(data["scheduler"])
        loop = dict(data["loop"])
        self.result = TrainResult(list(loop.pop("history")), loop.pop("best_step"), loop.pop("best_metric"))
        self.loop.update(loop)
        self.best_state = data.get("best_model")
        set_rng_state(data["rng"])


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
