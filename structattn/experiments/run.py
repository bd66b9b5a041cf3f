"""One run: a task, a setting and a seed, trained and evaluated; the record it leaves.

This is the orchestration every kind of run shares (seeding, structure providers, the record and its
provenance, rebuilding from a checkpoint). What differs between kinds (our encoder, an HF encoder, our
encoder-decoder, ...) lives in one runner per kind (:mod:`structattn.experiments.runners`), found by
:func:`~structattn.experiments.runners.runner_for`; nothing here asks which kind it is running.

The pieces (:func:`prepare_data`, :func:`build_model`, :func:`execute`) are shared by ``structattn train``
(one run), ``structattn compare`` (many) and ``structattn eval`` (rebuild from a checkpoint).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from structattn import plugins
from structattn.encoders import EncoderConfig
from structattn.experiments.provenance import Stopwatch, data_checksum, environment
from structattn.experiments.runners import Job, runner_for
from structattn.experiments.runners.encoder import PreparedData, make_vocab
from structattn.experiments.spec import RunSpec, Setup, make_providers, make_task, plain_options
from structattn.structures.providers.base import StructureProvider
from structattn.tasks.base import Item, Task
from structattn.training import Distributed, seed_everything
from structattn.training.precision import resolve_precision

__all__ = ["PreparedData", "RunSpec", "Setup", "build_model", "evaluate_checkpoint", "execute", "make_providers",
           "make_task", "make_vocab", "plan_structures", "prepare_data", "rebuild_meta", "run_provenance"]


def plan_structures(plan: str, model: EncoderConfig, task: Task) -> set[str]:
    """Names of the structures the setting ``plan`` reads on ``task``."""
    return runner_for(task, plan).structures(plan, model)


def prepare_data(task: Task, providers: Mapping[str, StructureProvider], vocab_options: Mapping[str, Any],
                 quiet: bool = False, items: dict[str, list[Item]] | None = None,
                 cache_dir: str | None = None) -> Any:
    """Load the task's splits (unless ``items`` are given), build the vocabulary on train, encode every split
    once (structures through the disk cache at ``cache_dir`` when given), as the task's plain-plan kind of
    run prepares them (settings of other kinds sharing its ``data_kind`` start from the same data)."""
    return runner_for(task, "full").prepare(task, providers, vocab_options, quiet=quiet, items=items,
                                            cache_dir=cache_dir)


def build_model(task: Task, vocab_size: int, plan: str, model: EncoderConfig,
                providers: Mapping[str, StructureProvider]) -> Any:
    """The model of ``plan`` on ``task`` (plan checked against the providers' fields), for kinds whose models
    are built from one vocabulary size (``encoder``, ``hf``)."""
    return runner_for(task, plan).build(task, vocab_size, plan, model, providers)


def execute(spec: RunSpec, setup: Setup, data: Any, *, out_dir: Path | None = None,
            context: Distributed = Distributed(), quiet: bool = False, config: str = "",
            resume: Path | None = None) -> dict[str, Any]:
    """Train and evaluate one run; return its record (JSON-ready), checkpoints under ``out_dir``."""
    runner = runner_for(data.task, spec.plan)
    start, watch = time.perf_counter(), Stopwatch()
    seed_everything(spec.seed)
    providers = make_providers(runner.structures(spec.plan, setup.model), setup.structures)
    outcome = runner.train(Job(spec, setup, data, providers, out_dir, context, quiet, config, resume))
    samples = outcome.pop("samples", None)
    # A resumed run's time counts its earlier segments too (their training time up to the checkpoint it resumed
    # from, as the checkpoint recorded it); provenance.wall_time_s stays this process's share.
    earlier = float(outcome.pop("earlier_s", 0.0))
    record = {**asdict(spec), "run_id": spec.run_id, "metric": data.task.metric,
              "precision": resolve_precision(setup.training.precision, context.device), **outcome,
              "time_s": time.perf_counter() - start + earlier,
              "provenance": {**run_provenance(spec, data, watch), "earlier_segments_s": earlier}}
    return record if samples is None else {**record, "samples": samples}


def run_provenance(spec: RunSpec, data: Any, watch: Stopwatch) -> dict[str, Any]:
    """The environment of a run (:func:`structattn.experiments.provenance.environment`), its start and wall
    time, and its data: the task spec, the items per split and their checksum."""
    counts = {split: len(items) for split, items in data.items.items()}
    return {**environment(), **watch.fields(),
            "data": {"task": spec.task, "items": counts, "sha256": data.checksum}}


def rebuild_meta(data: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint's ``meta``, checked to say how to rebuild its model, after replaying the plugins the run
    recorded (so that its task, plan and structures resolve).

    Raises:
        ValueError: ``meta`` lacks a field a rebuild needs, or a plugin cannot be imported.
    """
    meta = data.get("meta") or {}
    missing = sorted({"task", "plan", "structures", "model", "vocab"} - set(meta))
    if missing:
        raise ValueError(f"the checkpoint does not say how to rebuild its model (meta lacks {missing})")
    plugins.replay(meta.get("plugins"), recorded_by=f"run {meta.get('run_id', '?')}")
    return meta


def rebuild_task(meta: Mapping[str, Any]) -> Task:
    """The checkpoint's task, checked to build the options it was trained with."""
    task = make_task(meta["task"])
    recorded = meta.get("task_options")  # absent from checkpoints written before it was recorded
    now = plain_options(task.options())
    if recorded is not None and now != recorded:
        changed = sorted(k for k in set(now) | set(recorded) if now.get(k) != recorded.get(k))
        raise ValueError(
            f"task {meta['task']!r} now builds options {now}, but the checkpoint was trained with {recorded} "
            f"(differing: {changed}); a default changed since: write the recorded options into the task spec"
        )
    return task


def evaluate_checkpoint(data: dict[str, Any], split: str = "test", quiet: bool = False) -> dict[str, float]:
    """Rebuild the model stored in a checkpoint (its ``meta``) and score it on ``split``: ``loss`` and
    ``accuracy``, plus what its kind of run adds (``bleu`` and ``chrf`` for a translation run)."""
    meta = rebuild_meta(data)
    task = rebuild_task(meta)
    items = task.splits()
    if split not in items:
        raise ValueError(f"unknown split {split!r}; the task has {sorted(items)}")
    _warn_on_changed_data(meta, items)
    return runner_for(task, meta["plan"]).evaluate(data, meta, task, items, split, quiet)


def checkpoint_predictions(data: dict[str, Any], task: Task | None = None, split: str = "test",
                           quiet: bool = False) -> dict[str, Any]:
    """Per-item outputs of a checkpoint's model on ``split`` (``ids``, ``correct``, ``total``: what
    ``record["predictions"]`` holds and the significance tests pair).

    Args:
        data: a loaded checkpoint (``torch.load`` of ``best.pt`` or ``last.pt``).
        task: score on this task's items instead of the checkpoint's own task, e.g. the same task with
            ``trees="spacy-test"`` (the model reads parser trees, the labels stay gold). It must have the
            checkpoint's kind of output and the same ``split`` item ids.

    Raises:
        ValueError: an unknown split, a task of another output kind or other item ids, or a kind of run that
            has no per-item predictions (translation).
    """
    meta = rebuild_meta(data)
    own = rebuild_task(meta)
    task = task or own
    if task.output != own.output:
        raise ValueError(f"task {task.name!r} has {task.output!r} outputs; the checkpoint's task {own.name!r} has "
                         f"{own.output!r}")
    items = task.splits()
    if split not in items:
        raise ValueError(f"unknown split {split!r}; the task has {sorted(items)}")
    if task is not own and [x.id for x in items[split]] != [x.id for x in own.splits()[split]]:
        raise ValueError(f"task {task.name!r} ({task.options()}) has other {split} items than the checkpoint's task "
                         f"{meta['task']!r}")
    if task is own:
        _warn_on_changed_data(meta, items)
    return runner_for(task, meta["plan"]).predict(data, meta, task, items, split, quiet)


def _warn_on_changed_data(meta: Mapping[str, Any], items: Mapping[str, list[Item]]) -> None:
    """One line on stderr when the task's data now hashes differently from what the run trained on."""
    recorded = meta.get("data_sha256")
    now = data_checksum(items)
    if recorded and recorded != now:
        print(f"structattn: warning: the data of task {meta['task']!r} changed since run {meta.get('run_id', '?')}: "
              f"sha256 {recorded[:16]} when trained, {now[:16]} now", file=sys.stderr)

