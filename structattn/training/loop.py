"""What the classification and the translation trainer share: the step loop over length-bucketed batches, the
optimiser update with the divergence check, keeping the best dev weights, early stopping, and the
``last.pt`` / ``best.pt`` checkpoints with resume, and the metrics log written while training (``log.jsonl``,
``log.csv`` and, when the ``tensorboard`` package is installed, TensorBoard scalars under ``tb/``; see
:mod:`structattn.training.metrics_log`).

Subclasses (:class:`~structattn.training.trainer.Trainer`, :class:`~structattn.training.seq2seq.Seq2SeqTrainer`)
say how examples become batches and losses, and how dev is scored. Resuming is refused when the checkpoint
was trained with other settings (see :meth:`TrainingLoop.fit`).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from tqdm.auto import tqdm

from structattn.progress import progress_bar
from structattn.training.batching import LengthBucketSampler
from structattn.training.checkpoints import load_checkpoint, save_checkpoint
from structattn.training.config import TrainConfig
from structattn.training.deadline import TimeLimitReached, past_deadline
from structattn.training.metrics_log import MetricsLog
from structattn.training.param_groups import parameter_groups
from structattn.training.precision import resolve_precision
from structattn.training.schedule import make_scheduler
from structattn.training.seeding import rng_state, set_rng_state

#: settings a resumed run may change (a longer run, other evaluation cadence); any other differs -> refused
#: a gradient norm (before clipping) above this many times ``clip_norm`` is warned about, once per run
CLIPPING_WARN_RATIO = 1e3
RESUMABLE_CHANGES = frozenset({"max_steps", "eval_every", "patience", "eval_batch_size"})
#: ``meta`` entries that describe the circumstances of a run rather than what it trains
META_NOT_COMPARED = frozenset({"run_id", "provenance", "plugins"})


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns; ``history`` has one row per evaluation; ``earlier_s``: the training
    seconds of the segments before a resume (the checkpoint's ``elapsed_s``; 0 for a run trained in one go)."""

    history: list[dict[str, float]] = field(default_factory=list)
    best_step: int = 0
    best_metric: float = -math.inf
    steps: int = 0
    stopped_early: bool = False
    earlier_s: float = 0.0


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


def make_optimizer(model: torch.nn.Module, config: TrainConfig, fused: bool = False) -> torch.optim.AdamW:
    """AdamW over ``model.parameter_groups(config)`` when the model defines it (e.g. HF fine-tuning: other
    learning rates for pretrained and new parameters), else over :func:`parameter_groups` (decay on weight
    matrices only, see :class:`TrainConfig`).

    ``fused``: torch's fused AdamW kernel (one pass over each parameter instead of a dozen elementwise
    operators; the same update up to rounding) where every parameter is on a device it supports (CPU, CUDA),
    else the plain one. The bf16 path uses it; fp32 keeps the plain AdamW, so fp32 runs repeat exactly."""
    custom = getattr(model, "parameter_groups", None)
    groups = custom(config) if callable(custom) else parameter_groups(model, config.weight_decay)
    if fused and all(p.device.type in ("cpu", "cuda") and p.dtype == torch.float32
                     for g in groups for p in g["params"]):
        return torch.optim.AdamW(groups, lr=config.lr, fused=True)
    return torch.optim.AdamW(groups, lr=config.lr)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for a model without parameters)."""
    first = next(model.parameters(), None)
    return torch.device("cpu") if first is None else first.device


class TrainingLoop:
    """The loop state and bookkeeping of a trainer (see the module docstring).

    Hooks: :meth:`_sampler` (batches of example indices), :meth:`_train_on` (one update on some examples,
    through :meth:`_update`), :meth:`_dev_row` (a history row and the value that picks the best weights);
    optionally :meth:`_save` (which processes write checkpoints).

    Subclasses set ``seed`` (of the batch order; saved in ``last.pt`` and checked on resume), and may set
    ``run_id`` (names the run in errors), ``quiet`` and ``writes_outputs`` (``False`` on the data-parallel
    processes other than the main one: no checkpoints, no log).

    With a ``checkpoint_dir``, every evaluation also appends a row to the metrics log (see :attr:`log_dir`):
    ``log.jsonl`` and ``log.csv`` with the columns ``step, epoch, train_loss, dev_..., lr, elapsed_s``, and
    TensorBoard scalars under ``tb/`` when ``tensorboard`` is installed (skipped silently when it is not). A
    resumed run appends to the log, without repeating a step.
    """

    run_id: str | None = None
    quiet: bool = False
    seed: int = 0
    writes_outputs: bool = True

    def __init__(self, model: torch.nn.Module, config: TrainConfig, checkpoint_dir: str | Path | None,
                 checkpoint_extra: dict[str, Any] | None) -> None:
        self.model, self.config = model, config
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_extra = checkpoint_extra or {}
        #: the precision this run trains in: ``config.precision`` with ``'auto'`` resolved on the model's device
        self.precision = resolve_precision(config.precision, model_device(model))
        self.optimizer = make_optimizer(model, config, fused=self.precision == "bf16")
        self.scheduler = make_scheduler(self.optimizer, config.warmup_steps)
        self.loop: dict[str, Any] = {"step": 0, "epoch": 0, "position": 0, "bad_evals": 0, "loss_sum": 0.0,
                                     "loss_count": 0, "elapsed_s": 0.0}
        self.result = TrainResult()
        self.best_state: dict[str, torch.Tensor] | None = None
        self.metrics_log: MetricsLog | None = None
        self._clock_start = time.perf_counter()

    @property
    def log_dir(self) -> Path | None:
        """Where the metrics log goes: beside the checkpoint folder when it is named ``checkpoints`` (a run
        folder ``out/`` with ``out/checkpoints/``: ``out/log.jsonl``), else into the checkpoint folder itself
        (so nothing is written outside the folder given); ``None`` without a checkpoint folder."""
        if self.checkpoint_dir is None:
            return None
        return self.checkpoint_dir.parent if self.checkpoint_dir.name == "checkpoints" else self.checkpoint_dir

    # -- hooks -----------------------------------------------------------------------------------------
    def _sampler(self, train: Sequence[Any]) -> LengthBucketSampler:
        raise NotImplementedError

    def _train_on(self, examples: Sequence[Any]) -> None:
        raise NotImplementedError

    def _dev_row(self, dev: Sequence[Any]) -> tuple[dict[str, float], float]:
        raise NotImplementedError

    # -- the loop --------------------------------------------------------------------------------------
    def fit(self, train: Sequence[Any], dev: Sequence[Any], resume: str | Path | None = None) -> TrainResult:
        """Train until ``max_steps`` or early stopping; the model ends with the best dev weights.

        ``resume``: a ``last.pt`` to continue from. Only ``max_steps``, ``eval_every``, ``patience`` and
        ``eval_batch_size`` may differ from the checkpoint's settings; any other difference (learning rate,
        seed, model, ``meta``) is refused, so a record never states settings that were not used.

        Raises:
            ValueError: ``resume`` holds only weights, or was trained with other settings (listing the
                checkpoint's and this trainer's values); the training loss or the gradient norm became NaN or
                infinite (naming the step, the learning rate and the run).
        """
        if resume is not None:
            data = load_checkpoint(resume)
            self._check_resumable(data, resume)
            self._restore(data)
            self.result.earlier_s = float(self.loop.get("elapsed_s", 0.0))
        self._clock_start = time.perf_counter() - self.loop.get("elapsed_s", 0.0)
        if self.log_dir is not None and self.writes_outputs:
            self.metrics_log = MetricsLog(self.log_dir, self.loop["step"])
        try:
            self._train(train, dev)
        finally:
            if self.metrics_log is not None:
                self.metrics_log.close()
                self.metrics_log = None
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        self.result.steps = self.loop["step"]
        return self.result

    def _train(self, train: Sequence[Any], dev: Sequence[Any]) -> None:
        """The step loop, from where :attr:`loop` stands to ``max_steps`` or early stopping."""
        sampler = self._sampler(train)
        bar = progress_bar(total=self.config.max_steps, initial=self.loop["step"], desc="train", quiet=self.quiet)
        stop = self.loop["step"] >= self.config.max_steps
        while not stop:
            batches = sampler.batches(self.loop["epoch"])
            while self.loop["position"] < len(batches) and not stop:
                self._train_on([train[i] for i in batches[self.loop["position"]]])
                self.loop["position"] += 1
                bar.update(1)
                if self.loop["step"] % self.config.eval_every == 0 or self.loop["step"] >= self.config.max_steps:
                    stop = self._evaluate_and_save(dev, bar)
                stop = stop or self.loop["step"] >= self.config.max_steps
                if not stop and past_deadline():
                    bar.close()
                    self._stop_at_deadline()
            if self.loop["position"] >= len(batches):
                self.loop["epoch"], self.loop["position"] = self.loop["epoch"] + 1, 0
        bar.close()

    def _stop_at_deadline(self) -> None:
        """Write ``last.pt`` where the loop stands and raise :class:`TimeLimitReached` (see
        :mod:`structattn.training.deadline`)."""
        self.loop["elapsed_s"] = time.perf_counter() - self._clock_start
        if self.writes_outputs:
            self._save_checkpoints(improved=False)
        saved = None if self.checkpoint_dir is None else str(self.checkpoint_dir / "last.pt")
        raise TimeLimitReached(self.loop["step"], saved, self.run_id)

    def _update(self, loss: torch.Tensor) -> None:
        """One optimiser step on ``loss`` (clipped; a NaN / inf loss or gradient norm stops the run)."""
        self._check_finite("training loss", loss)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.clip_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
            self._check_finite("gradient norm", norm)
            value = float(norm)
            self._warn_if_clipping_dominates(value)
            self.loop.setdefault("grad_norms", []).append(value)
        self.optimizer.step()
        self.scheduler.step()
        self.loop["step"] += 1
        self.loop["loss_sum"] += float(loss.detach())
        self.loop["loss_count"] += 1

    def autocast(self, device: torch.device | str) -> contextlib.AbstractContextManager:
        """The context of a training forward pass: bfloat16 autocast on ``device`` when the run's
        :attr:`precision` is ``"bf16"``, else nothing."""
        if self.precision == "bf16":
            return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _warn_if_clipping_dominates(self, norm: float) -> None:
        """Warn once per run when the gradient norm before clipping exceeds :data:`CLIPPING_WARN_RATIO` times
        ``clip_norm``: the step is then set by a few huge components (an exploding estimator, a too-high lr)
        and the other parameters barely move, a silent stall otherwise."""
        if getattr(self, "_clipping_warned", False) or norm <= CLIPPING_WARN_RATIO * self.config.clip_norm:
            return
        self._clipping_warned = True
        who = f"run {self.run_id}: " if self.run_id else ""
        warnings.warn(f"{who}gradient norm {norm:.3g} before clipping at step {self.loop['step'] + 1} is over "
                      f"{CLIPPING_WARN_RATIO:g}x training.clip_norm ({self.config.clip_norm:g}): the clipped update is "
                      "set by the largest gradients and the other parameters barely move (hard ssan's straight-through "
                      "gradient can explode, on pretrained models and on Multi30k from scratch: ssan(..., soft=True) "
                      "avoids it; see docs/hf.md). The run's history keeps the gradient norms and the clip factor "
                      "of every evaluation interval (train_grad_norm_median, train_clip_factor_median)",
                      RuntimeWarning, stacklevel=2)

    def _check_finite(self, what: str, value: torch.Tensor) -> None:
        stop_if_diverged(what, value, step=self.loop["step"] + 1, lr=self.scheduler.get_last_lr()[0],
                         run_id=self.run_id)

    def _evaluate_and_save(self, dev: Sequence[Any], bar: tqdm) -> bool:
        """Evaluate, keep the best weights, checkpoint; True when patience has run out."""
        row, value = self._dev_row(dev)
        row.update(self._gradient_row())
        self.result.history.append(row)
        self.loop["elapsed_s"] = time.perf_counter() - self._clock_start
        if self.metrics_log is not None:
            self.metrics_log.write(self._log_row(row))
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

    def _gradient_row(self) -> dict[str, float]:
        """The gradient norms (before clipping) of the steps since the last evaluation, and how much clipping
        shrank them: ``train_grad_norm_median``, ``train_grad_norm_max`` and ``train_clip_factor_median`` (the
        median over steps of ``min(1, clip_norm / norm)``: 1 when clipping never bit, 0.01 when the median step
        was shrunk 100-fold, i.e. a few huge gradients set every update). Empty without clipping
        (``clip_norm = 0``: the norm is not computed); for a run resumed from a checkpoint written before these
        were kept, they cover the interval's steps since the resume."""
        norms, self.loop["grad_norms"] = self.loop.get("grad_norms") or [], []
        if not norms:
            return {}
        clip = self.config.clip_norm
        return {"train_grad_norm_median": statistics.median(norms), "train_grad_norm_max": max(norms),
                "train_clip_factor_median": statistics.median(min(1.0, clip / n) if n > 0 else 1.0 for n in norms)}

    def _log_row(self, row: dict[str, float]) -> dict[str, float]:
        """A history row as a metrics-log row: ``step, epoch, train_loss, dev_..., lr, elapsed_s``."""
        rest = {k: v for k, v in row.items() if k not in ("step", "lr")}
        return {"step": row["step"], "epoch": self.loop["epoch"], **rest, "lr": row["lr"],
                "elapsed_s": round(self.loop["elapsed_s"], 3)}

    # -- checkpoints -----------------------------------------------------------------------------------
    def _save(self, improved: bool) -> None:
        self._save_checkpoints(improved)

    def _save_checkpoints(self, improved: bool) -> None:
        """``last.pt`` (resumable: optimiser, schedule, loop, random state, settings and seed) and, when
        ``improved``, ``best.pt`` (weights and loop)."""
        if self.checkpoint_dir is None:
            return
        loop = {**self.loop, "history": self.result.history, "best_step": self.result.best_step,
                "best_metric": self.result.best_metric}
        save_checkpoint(self.checkpoint_dir / "last.pt", model=self.model.state_dict(), best_model=self.best_state,
                        optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(), loop=loop,
                        rng=rng_state(), train_config=self.config.to_dict(), seed=self.seed,
                        precision_used=self.precision, **self.checkpoint_extra)
        if improved:
            save_checkpoint(self.checkpoint_dir / "best.pt", model=self.best_state, loop=loop, **self.checkpoint_extra)

    def _check_resumable(self, data: dict[str, Any], path: str | Path) -> None:
        """Refuse a weights-only checkpoint, or one trained with other settings than this trainer's."""
        if "optimizer" not in data:
            raise ValueError("this checkpoint holds only model weights (best.pt?); resume from last.pt")
        differ = []
        saved = data.get("train_config") or {}
        for name, value in self.config.to_dict().items():
            if name not in RESUMABLE_CHANGES | {"batch_tokens"} and name in saved and saved[name] != value:
                differ.append(f"training.{name}: checkpoint {saved[name]!r}, config {value!r}")
        if saved.get("precision", "fp32") != self.config.precision:
            differ.append(f"training.precision: checkpoint {saved.get('precision', 'fp32')!r}, config "
                          f"{self.config.precision!r}")
        elif data.get("precision_used", self.precision) != self.precision:  # 'auto' on another machine
            differ.append(f"training.precision 'auto' trained in {data['precision_used']!r} but means "
                          f"{self.precision!r} on this machine (continue it on a machine where 'auto' means "
                          f"{data['precision_used']!r})")
        if saved.get("batch_tokens") != self.config.batch_tokens:  # None (left out of the dict): batch_size batches
            differ.append(f"training.batch_tokens: checkpoint {saved.get('batch_tokens')!r}, config "
                          f"{self.config.batch_tokens!r} (None: batches of batch_size sentences)")
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
