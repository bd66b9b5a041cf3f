"""The protocol of a kind of run, and how a run finds its kind.

A *runner* knows how to do one kind of run: which structures a setting reads, how a task's data is
prepared, how its model is built, trained, evaluated and described in checkpoints. Orchestration
(:mod:`structattn.experiments.run`, :mod:`structattn.experiments.compare`) never asks which kind it is
running: it looks the runner up with :func:`runner_for` and calls these methods.

A runner is chosen by two facts of a run, matched against each registered runner's class attributes:

* the *setting kind*: the call name of the setting when a runner claims it (``hf(path=...)`` -> ``"hf"``),
  else ``None`` (an attention plan such as ``"soft_bias(dependency)@0-1; full"``);
* the task's ``output`` (``"sentence"``, ``"token"``, ``"pair"``, ``"sequence"``).

A new kind of run is one new file::

    @register_runner("toy")
    class ToyRunner(Runner):
        setting = "toy"                 # settings spelled toy(...) come here
        outputs = ("sentence",)
        def structures(self, plan, model): ...
        def prepare(self, task, providers, vocab_options, *, quiet=False, items=None, cache_dir=None): ...
        def check(self, task, plan, setup, providers): ...
        def train(self, job): ...
        def evaluate(self, checkpoint, meta, task, items, split, quiet=False): ...
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from structattn import plugins
from structattn.encoders.config import EncoderConfig
from structattn.experiments.spec import RunSpec, Setup, plain_options, structure_specs
from structattn.registry import Registry
from structattn.structures.providers.base import StructureProvider
from structattn.tasks.base import Item, Task
from structattn.training.distributed import Distributed

RUNNERS: Registry["Runner"] = Registry("kind of run", builtin="structattn.experiments.runners.builtin")
register_runner = RUNNERS.register

_HEAD_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


@dataclass(frozen=True)
class Job:
    """One run as the orchestration hands it to a runner.

    Args:
        spec: the run's identity (task, setting, plan, seed).
        setup: what every run of the comparison shares.
        data: the task's prepared data (what the runner's :meth:`Runner.prepare` returned).
        providers: the providers of the structures this run reads (``names``).
        out_dir: where checkpoints and per-run files go (``None``: nowhere).
        context: the data-parallel context (device, rank).
        quiet: no progress bars.
        config: the operative gin config, stored in checkpoints.
        resume: a ``last.pt`` to continue from.
    """

    spec: RunSpec
    setup: Setup
    data: Any
    providers: Mapping[str, StructureProvider]
    out_dir: Path | None = None
    context: Distributed = Distributed()
    quiet: bool = False
    config: str = ""
    resume: Path | None = None

    @property
    def names(self) -> set[str]:
        """The structures the run reads."""
        return set(self.providers)

    @property
    def checkpoint_dir(self) -> Path | None:
        return None if self.out_dir is None else self.out_dir / "checkpoints"


class Runner(ABC):
    """One kind of run (see the module docstring).

    Class attributes:
        name: the registry key.
        setting: the setting call this runner claims (``"hf"``), or ``None`` for attention plans.
        outputs: the task outputs it serves.
        data_kind: runs whose runners share a ``data_kind`` share one prepared copy of a task's data
            (default: the runner's name).
        rebuild_refusal: why :meth:`rebuild_encoder` cannot rebuild this kind's models for probing.
    """

    name: ClassVar[str]
    setting: ClassVar[str | None] = None
    outputs: ClassVar[tuple[str, ...]] = ()
    data_kind: ClassVar[str | None] = None
    rebuild_refusal: ClassVar[str] = "probe reads encoder-only models"

    @classmethod
    def data_key(cls) -> str:
        return cls.data_kind or cls.name

    @abstractmethod
    def structures(self, plan: str, model: EncoderConfig) -> set[str]:
        """Names of the structures the setting ``plan`` reads."""

    @abstractmethod
    def prepare(self, task: Task, providers: Mapping[str, StructureProvider], vocab_options: Mapping[str, Any], *,
                quiet: bool = False, items: dict[str, list[Item]] | None = None, cache_dir: str | None = None) -> Any:
        """The task's splits (``items`` when given) encoded once, with ``providers``' structures; the result
        has ``task``, ``items`` (per split) and ``checksum`` attributes."""

    @abstractmethod
    def check(self, task: Task, plan: str, setup: Setup, providers: Mapping[str, StructureProvider]) -> None:
        """Build the setting's model for ``task`` once (tiny vocabulary): a bad plan or a variant paired with a
        structure that lacks its fields raises ``ValueError`` before any training."""

    def dry_run(self, task: Task, plan: str, setup: Setup, items: Sequence[Item]) -> None:
        """Build the model and run it forward on ``items`` (no training); ``ValueError`` on any failure.
        Default: :meth:`check` only."""
        self.check(task, plan, setup, {})

    @abstractmethod
    def train(self, job: Job) -> dict[str, Any]:
        """Train and evaluate one run. Returns the kind's part of the record: ``metrics``, ``history``,
        ``best_step``, ``steps``, ``stopped_early``, ``num_parameters``, ``bias``, ``heatmap`` and
        ``predictions`` (per-item test outputs for significance tests), plus anything of its own."""

    @abstractmethod
    def evaluate(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                 items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, float]:
        """Rebuild the checkpoint's model from ``meta`` and score it on ``split`` as the run did."""

    def predict(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, Any]:
        """Per-item outputs of the checkpoint's model on ``split``, as ``record["predictions"]`` holds them
        (``ids``, ``correct``, ``total`` for accuracy tasks). Default: refused, naming the kind."""
        raise ValueError(f"run {meta.get('run_id', '?')} is a {self.name} run ({meta.get('plan')}); per-item "
                         f"predictions of a checkpoint are available for encoder and hf runs")

    def rebuild_encoder(self, meta: Mapping[str, Any], task: Task) -> Any:
        """``(make_model, vocab, providers)`` of a checkpoint, for probing its encoder. Default: refused."""
        raise ValueError(f"run {meta.get('run_id', '?')} is a {self.name} run ({meta.get('plan')}); "
                         f"{self.rebuild_refusal}")

    def meta(self, job: Job) -> dict[str, Any]:
        """How to rebuild the run's model and its input pipeline (stored in every checkpoint)."""
        spec, data = job.spec, job.data
        return {"task": spec.task, "task_options": plain_options(data.task.options()), "plan": spec.plan,
                "structures": structure_specs(job.names, job.setup), "model": job.setup.model.to_dict(),
                "vocab": data.vocab.to_dict(), "seed": spec.seed, "run_id": spec.run_id,
                "data_sha256": data.checksum, "plugins": plugins.loaded()}


def setting_kind(plan: str) -> str | None:
    """The setting call a registered runner claims (``'hf(path="m")'`` -> ``"hf"``), else ``None``."""
    found = _HEAD_CALL.match(plan)
    claimed = {cls.setting for _, cls in RUNNERS.items() if cls.setting is not None}
    return found.group(1) if found and found.group(1) in claimed else None


def runner_for(task: Task, plan: str) -> Runner:
    """The runner of the kind of run that ``plan`` on ``task`` is.

    Raises:
        ValueError: no registered runner serves the pair, naming the setting kind, the task's output and the
            registered kinds.
    """
    kind, output = setting_kind(plan), task.output
    found = [cls for _, cls in RUNNERS.items() if cls.setting == kind and output in cls.outputs]
    if len(found) != 1:
        served = "; ".join(f"{n}: {cls.setting or 'attention plans'} on {'/'.join(cls.outputs)}"
                           for n, cls in RUNNERS.items())
        what = "no kind of run" if not found else f"{len(found)} kinds of run ({', '.join(c.name for c in found)})"
        raise ValueError(f"{what} for setting {plan!r} ({kind or 'an attention plan'}) on task {task.name!r} "
                         f"(output {output!r}); registered: {served}")
    return found[0]()

