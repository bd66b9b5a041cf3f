"""One run: a task, an attention plan and a seed, trained and evaluated; the record it leaves.

The pieces (:func:`prepare_data`, :func:`build_model`, :func:`execute`) are shared by ``structattn train``
(one run), ``structattn compare`` (many) and ``structattn eval`` (rebuild from a checkpoint).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, TypeVar

from structattn.encoders import ChunkSplitter, EncoderConfig, TaskModel, Vocab, build_encoder, make_head, parse_call, parse_plan
from structattn import plugins
from structattn.experiments import hf_models
from structattn.experiments.inspect import bias_records, heatmap_record
from structattn.experiments.provenance import Stopwatch, data_checksum, environment
from structattn.experiments.results import slug
from structattn.tasks.base import Item, Task, get_task
from structattn.structures.cache import StructureCache
from structattn.structures.providers.base import StructureProvider, get_provider
from structattn.training import Distributed, Example, TrainConfig, Trainer, encode_items, evaluate, seed_everything

E = TypeVar("E")  #: an encoded example with a ``structures`` field


@dataclass(frozen=True)
class RunSpec:
    """What distinguishes one run of a comparison (labels are for tables; ``task``/``plan`` are the specs)."""

    index: int
    task_label: str
    task: str
    setting: str
    plan: str
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.index:03d}_{slug(self.task_label)}_{slug(self.setting)}_s{self.seed}"


@dataclass(frozen=True)
class Setup:
    """What every run of a comparison shares.

    Args:
        model: encoder sizes.
        training: optimisation settings.
        structures: structure name -> provider spec (``"window(radius=3)"``); a name not listed is a
            provider name with default options (``dependency``).
        vocab: options of :meth:`Vocab.build` (``min_freq``, ``max_size``, ``lowercase``) plus
            ``subword_chars`` (split words into pieces of that many characters; absent: word-level).
        cache_dir: a structure disk cache (``structattn.structures.cache``) to read and fill, or ``None``.
        probes: probe-step specs run on every trained model (:mod:`structattn.experiments.probe_steps`).
    """

    model: EncoderConfig
    training: TrainConfig
    structures: Mapping[str, str] = field(default_factory=dict)
    vocab: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    probes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What defines the results (the cache folder does not)."""
        out = {"model": self.model.to_dict(), "training": self.training.to_dict(),
               "structures": dict(self.structures), "vocab": dict(self.vocab)}
        return {**out, "probes": list(self.probes)} if self.probes else out


@dataclass
class PreparedData:
    """A task's items encoded once: vocabulary, examples per split, majority baseline."""

    task: Task
    vocab: Vocab
    items: dict[str, list[Item]]
    examples: dict[str, list[Example]]
    baseline: float | None
    checksum: str = ""  #: :func:`structattn.experiments.provenance.data_checksum` of ``items``


def plan_structures(plan: str, model: EncoderConfig) -> set[str]:
    """Names of the structures an attention plan reads."""
    if hf_models.is_hf_setting(plan):  # HF hook (structattn.experiments.hf_models): hf(...) settings
        return hf_models.plan_structures(plan)
    return {g.structure for groups in parse_plan(plan, model.num_layers, model.num_heads)
            for g in groups if g.structure is not None}


def make_providers(names: Iterable[str], structures: Mapping[str, str]) -> dict[str, StructureProvider]:
    """The provider of every structure name (sorted by name)."""
    providers = {}
    for name in sorted(names):
        call = parse_call(structures.get(name, name), f"structure {name!r}")
        if call.args:
            raise ValueError(f"structure {name!r}: provider options must be keywords, got {structures[name]!r}")
        try:
            providers[name] = get_provider(call.name, **call.options)
        except TypeError as err:
            raise ValueError(f"structure {name!r}: bad options for provider {call.name!r}: {err}") from None
    return providers


def make_task(spec: str) -> Task:
    """The task named by a spec such as ``"depth_tagging(max_depth=5)"``."""
    call = parse_call(spec, "task")
    if call.args:
        raise ValueError(f"task {spec!r}: options must be keywords")
    return get_task(call.name, **call.options)


def make_vocab(items: list[Item], task: Task, options: Mapping[str, Any]) -> Vocab:
    """Vocabulary of the train items (see :class:`Setup` for ``options``)."""
    options = dict(options)
    chars = options.pop("subword_chars", None)
    try:
        return Vocab.build((task.inputs(x) for x in items), splitter=ChunkSplitter(chars) if chars else None, **options)
    except TypeError as err:
        raise ValueError(f"bad vocabulary options {dict(options)}: {err}") from None


def prepare_data(task: Task, providers: Mapping[str, StructureProvider], vocab_options: Mapping[str, Any],
                 quiet: bool = False, vocab: Vocab | None = None, items: dict[str, list[Item]] | None = None,
                 cache_dir: str | None = None) -> PreparedData:
    """Load the task's splits (unless ``items`` are given), build the vocabulary on train (unless given),
    encode every split once (structures through the disk cache at ``cache_dir`` when given)."""
    if task.output == "sequence":  # translation tasks: structattn.experiments.translation
        from structattn.experiments.translation import prepare_translation
        return prepare_translation(task, providers, vocab_options, quiet, vocab, items, cache_dir)  # type: ignore[return-value]
    items = items if items is not None else task.splits()
    vocab = vocab or make_vocab(items["train"], task, vocab_options)
    cache = None if cache_dir is None else StructureCache(cache_dir)
    examples = {split: encode_items(xs, task, vocab, providers, quiet=quiet, desc=f"preprocess {split}", cache=cache)
                for split, xs in items.items()}
    baseline = task.baseline([e.label for e in examples["train"]], [e.label for e in examples.get("test", [])])
    return PreparedData(task, vocab, items, examples, baseline, data_checksum(items))


def build_model(task: Task, vocab_size: int, plan: str, model: EncoderConfig,
                providers: Mapping[str, StructureProvider]) -> TaskModel:
    """Encoder (plan checked against the providers' fields) plus the task's head."""
    if hf_models.is_hf_setting(plan):  # HF hook (structattn.experiments.hf_models): hf(...) settings
        return hf_models.build_model(task, vocab_size, plan, providers)  # type: ignore[return-value]
    if task.output == "sequence":  # translation tasks: structattn.experiments.translation
        from structattn.experiments.translation import build_translation_model
        return build_translation_model(task, vocab_size, vocab_size, plan, model, providers)  # type: ignore[return-value]
    fields = {name: p.provides for name, p in providers.items()}
    encoder = build_encoder(model, plan, vocab_size, fields)
    return TaskModel(encoder, make_head(task.output, model.d_model, task.num_labels, model.dropout))


def execute(spec: RunSpec, setup: Setup, data: PreparedData, *, out_dir: Path | None = None,
            context: Distributed = Distributed(), quiet: bool = False, config: str = "",
            resume: Path | None = None) -> dict[str, Any]:
    """Train and evaluate one run; return its record (JSON-ready), checkpoints under ``out_dir``."""
    if data.task.output == "sequence":  # translation tasks: structattn.experiments.translation
        from structattn.experiments.translation import execute_translation
        return execute_translation(spec, setup, data, out_dir=out_dir, context=context, quiet=quiet, config=config, resume=resume)
    start, watch = time.perf_counter(), Stopwatch()
    seed_everything(spec.seed)
    names = plan_structures(spec.plan, setup.model)
    providers = make_providers(names, setup.structures)
    if hf_models.is_hf_setting(spec.plan):  # HF hook: re-tokenize the items with the model's tokenizer
        data = hf_models.encode_data(spec.plan, data, providers, quiet)
    model = build_model(data.task, len(data.vocab), spec.plan, setup.model, providers)
    meta = {"task": spec.task, "task_options": _plain(data.task.options()), "plan": spec.plan,
            "structures": {n: setup.structures.get(n, n) for n in names},
            "model": setup.model.to_dict(), "vocab": data.vocab.to_dict(), "seed": spec.seed, "run_id": spec.run_id,
            "data_sha256": data.checksum, "plugins": plugins.loaded()}
    trainer = Trainer(model, setup.training, data.task.output, seed=spec.seed, context=context, quiet=quiet,
                      checkpoint_dir=None if out_dir is None else out_dir / "checkpoints",
                      checkpoint_extra={"config": config, "meta": meta}, run_id=spec.run_id)
    view = {k: [_only(e, names) for e in xs] for k, xs in data.examples.items()}
    result = trainer.fit(view["train"], view["dev"], resume=resume)
    test = trainer.evaluate(view["test"], desc="test")
    metrics = {"test_accuracy": test["accuracy"], "dev_accuracy": result.best_metric, "test_loss": test["loss"]}
    if data.baseline is not None:
        metrics["majority_baseline"] = data.baseline
    if setup.probes:
        from structattn.experiments.probe_steps import run_probe_steps

        metrics.update(run_probe_steps(setup.probes, model, data, view, spec.seed, context.device))
    return {**asdict(spec), "run_id": spec.run_id, "metric": data.task.metric, "metrics": metrics,
            "history": result.history, "best_step": result.best_step, "steps": result.steps,
            "stopped_early": result.stopped_early, "num_parameters": sum(p.numel() for p in model.parameters()),
            "bias": bias_records(model), "heatmap": heatmap_record(model, data, view["test"], context.device),
            "time_s": time.perf_counter() - start, "provenance": run_provenance(spec, data, watch)}


def run_provenance(spec: RunSpec, data: PreparedData, watch: Stopwatch) -> dict[str, Any]:
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


def evaluate_checkpoint(data: dict[str, Any], split: str = "test", quiet: bool = False) -> dict[str, float]:
    """Rebuild the model stored in a checkpoint (its ``meta``) and score it on ``split``: ``loss`` and
    ``accuracy``, plus ``bleu`` and ``chrf`` for a translation run."""
    meta = rebuild_meta(data)
    task = make_task(meta["task"])
    recorded = meta.get("task_options")  # absent from checkpoints written before it was recorded
    if recorded is not None and _plain(task.options()) != recorded:
        now = _plain(task.options())
        changed = sorted(k for k in set(now) | set(recorded) if now.get(k) != recorded.get(k))
        raise ValueError(
            f"task {meta['task']!r} now builds options {now}, but the checkpoint was trained with {recorded} "
            f"(differing: {changed}); a default changed since: write the recorded options into the task spec"
        )
    items = task.splits()
    if split not in items:
        raise ValueError(f"unknown split {split!r}; the task has {sorted(items)}")
    _warn_on_changed_data(meta, items)
    if meta.get("kind") == "translation":  # both vocabularies, BLEU / chrF: structattn.experiments.translation
        from structattn.experiments.translation import evaluate_translation
        return evaluate_translation(data, task, items, split, quiet)  # type: ignore[arg-type]
    providers = make_providers(meta["structures"], meta["structures"])
    config = EncoderConfig(**meta["model"])
    if hf_models.is_hf_setting(meta["plan"]):  # HF hook: the setting's tokenizer, rebuilt as training built it
        vocab, examples = hf_models.evaluation_data(meta["plan"], task, items, split, providers,
                                                    meta["vocab"].get("tokenizer"), quiet)
    else:
        vocab = Vocab.from_dict(meta["vocab"])
        examples = encode_items(items[split], task, vocab, providers, quiet=quiet, desc=f"preprocess {split}")
    model = build_model(task, len(vocab), meta["plan"], config, providers)
    model.load_state_dict(data["model"])
    return evaluate(model, examples, task.output, batch_size=64, quiet=quiet, desc=split)


def _warn_on_changed_data(meta: Mapping[str, Any], items: Mapping[str, list[Item]]) -> None:
    """One line on stderr when the task's data now hashes differently from what the run trained on."""
    recorded = meta.get("data_sha256")
    now = data_checksum(items)
    if recorded and recorded != now:
        print(f"structattn: warning: the data of task {meta['task']!r} changed since run {meta.get('run_id', '?')}: "
              f"sha256 {recorded[:16]} when trained, {now[:16]} now", file=sys.stderr)


def _plain(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options as JSON gives them back (tuples as lists), so recorded and rebuilt options compare equal."""
    return json.loads(json.dumps(options, sort_keys=True, default=str))


def _only(example: E, names: set[str]) -> E:
    """The example (an :class:`Example` or a translation pair) with only the structures a run reads (no
    needless collation)."""
    if set(example.structures) == names:
        return example
    return replace(example, structures={n: example.structures[n] for n in names})

