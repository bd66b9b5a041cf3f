"""The ``encoder`` kind of run: our encoder (any attention plan) under a task head, on sentence, token and
pair tasks; the data every encoder-style kind (``hf`` too) starts from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from structattn.encoders import ChunkSplitter, EncoderConfig, TaskModel, Vocab, build_encoder, make_head, parse_plan
from structattn.experiments.inspect import bias_records, heatmap_record
from structattn.experiments.probe_steps import run_probe_steps
from structattn.experiments.provenance import data_checksum
from structattn.experiments.runners.base import Job, Runner, register_runner
from structattn.experiments.spec import Setup, make_providers, only_structures
from structattn.structures.cache import StructureCache
from structattn.structures.providers.base import StructureProvider
from structattn.tasks.base import Item, Task
from structattn.training import Example, Trainer, encode_items, evaluate, item_accuracy, make_batch


@dataclass
class PreparedData:
    """A task's items encoded once: vocabulary, examples per split, majority baseline."""

    task: Task
    vocab: Vocab
    items: dict[str, list[Item]]
    examples: dict[str, list[Example]]
    baseline: float | None
    checksum: str = ""  #: :func:`structattn.experiments.provenance.data_checksum` of ``items``


def make_vocab(items: list[Item], task: Task, options: Mapping[str, Any]) -> Vocab:
    """Vocabulary of the train items (see :class:`~structattn.experiments.spec.Setup` for ``options``)."""
    options = dict(options)
    chars = options.pop("subword_chars", None)
    try:
        return Vocab.build((task.inputs(x) for x in items), splitter=ChunkSplitter(chars) if chars else None, **options)
    except TypeError as err:
        raise ValueError(f"bad vocabulary options {dict(options)}: {err}") from None


def plan_structure_names(plan: str, model: EncoderConfig) -> set[str]:
    """Names of the structures an attention plan reads."""
    return {g.structure for groups in parse_plan(plan, model.num_layers, model.num_heads)
            for g in groups if g.structure is not None}


def predictions(model: torch.nn.Module, data: PreparedData, examples: Sequence[Example], batch_size: int,
                device: Any = "cpu") -> dict[str, Any]:
    """Per test item: targets predicted right and scored targets (``record["predictions"]``)."""
    correct, total = item_accuracy(model, examples, data.task.output, batch_size, device)
    return {"split": "test", "ids": [x.id for x in data.items["test"]], "correct": correct, "total": total}


@register_runner("encoder")
class EncoderRunner(Runner):
    """Our pre-LN encoder with the setting's attention plan, and the task's head."""

    outputs = ("sentence", "token", "pair")
    data_kind = "encoder"

    def structures(self, plan: str, model: EncoderConfig) -> set[str]:
        return plan_structure_names(plan, model)

    def prepare(self, task: Task, providers: Mapping[str, StructureProvider], vocab_options: Mapping[str, Any], *,
                quiet: bool = False, items: dict[str, list[Item]] | None = None, cache_dir: str | None = None,
                vocab: Vocab | None = None) -> PreparedData:
        items = items if items is not None else task.splits()
        vocab = vocab or make_vocab(items["train"], task, vocab_options)
        cache = None if cache_dir is None else StructureCache(cache_dir)
        examples = {split: encode_items(xs, task, vocab, providers, quiet=quiet, desc=f"preprocess {split}",
                                        cache=cache) for split, xs in items.items()}
        baseline = task.baseline([e.label for e in examples["train"]], [e.label for e in examples.get("test", [])])
        return PreparedData(task, vocab, items, examples, baseline, data_checksum(items))

    def build(self, task: Task, vocab_size: int, plan: str, model: EncoderConfig,
              providers: Mapping[str, StructureProvider]) -> torch.nn.Module:
        """Encoder (plan checked against the providers' fields) plus the task's head."""
        fields = {name: p.provides for name, p in providers.items()}
        encoder = build_encoder(model, plan, vocab_size, fields)
        return TaskModel(encoder, make_head(task.output, model.d_model, task.num_labels, model.dropout))

    def check(self, task: Task, plan: str, setup: Setup, providers: Mapping[str, StructureProvider]) -> None:
        self.build(task, 2, plan, setup.model, providers)

    def dry_run(self, task: Task, plan: str, setup: Setup, items: Sequence[Item]) -> None:
        providers = make_providers(self.structures(plan, setup.model), setup.structures)
        data = self.prepare(task, providers, setup.vocab, quiet=True, items={"train": list(items), "test": list(items)})
        data = self.encoded_for(plan, data, providers, True)
        model = self.build(task, len(data.vocab), plan, setup.model, providers).eval()
        logits = model(make_batch(data.examples["train"], task.output))
        if not torch.isfinite(logits).all():
            raise ValueError("non-finite outputs in a forward pass")

    def encoded_for(self, plan: str, data: PreparedData, providers: Mapping[str, StructureProvider],
                    quiet: bool) -> PreparedData:
        """The shared data as this setting's model reads it (here: as prepared)."""
        return data

    def train(self, job: Job) -> dict[str, Any]:
        spec, setup = job.spec, job.setup
        data = self.encoded_for(spec.plan, job.data, job.providers, job.quiet)
        job = Job(spec, setup, data, job.providers, job.out_dir, job.context, job.quiet, job.config, job.resume)
        model = self.build(data.task, len(data.vocab), spec.plan, setup.model, job.providers)
        trainer = Trainer(model, setup.training, data.task.output, seed=spec.seed, context=job.context, quiet=job.quiet,
                          checkpoint_dir=job.checkpoint_dir, checkpoint_extra={"config": job.config, "meta": self.meta(job)},
                          run_id=spec.run_id)
        view = {k: [only_structures(e, job.names) for e in xs] for k, xs in data.examples.items()}
        result = trainer.fit(view["train"], view["dev"], resume=job.resume)
        test = trainer.evaluate(view["test"], desc="test")
        metrics = {"test_accuracy": test["accuracy"], "dev_accuracy": result.best_metric, "test_loss": test["loss"]}
        if data.baseline is not None:
            metrics["majority_baseline"] = data.baseline
        if setup.probes:
            metrics.update(run_probe_steps(setup.probes, model, data, view, spec.seed, job.context.device))
        return {"metrics": metrics, "history": result.history, "best_step": result.best_step, "steps": result.steps,
                "stopped_early": result.stopped_early, "earlier_s": result.earlier_s,
                "num_parameters": sum(p.numel() for p in model.parameters()),
                "bias": bias_records(model), "heatmap": heatmap_record(model, data, view["test"], job.context.device),
                "predictions": predictions(model, data, view["test"], setup.training.eval_batch_size,
                                           job.context.device)}

    def evaluation_data(self, meta: Mapping[str, Any], task: Task, items: Mapping[str, list[Item]], split: str,
                        providers: Mapping[str, StructureProvider], quiet: bool) -> tuple[Any, list[Example]]:
        """The checkpoint's vocabulary and ``split`` encoded with it."""
        vocab = Vocab.from_dict(meta["vocab"])
        return vocab, encode_items(items[split], task, vocab, providers, quiet=quiet, desc=f"preprocess {split}")

    def evaluate(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                 items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, float]:
        model, examples = self._loaded(checkpoint, meta, task, items, split, quiet)
        return evaluate(model, examples, task.output, batch_size=64, quiet=quiet, desc=split)

    def predict(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, Any]:
        model, examples = self._loaded(checkpoint, meta, task, items, split, quiet)
        correct, total = item_accuracy(model, examples, task.output, 64)
        return {"split": split, "ids": [x.id for x in items[split]], "correct": correct, "total": total}

    def _loaded(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                items: Mapping[str, list[Item]], split: str, quiet: bool) -> tuple[torch.nn.Module, list[Example]]:
        """The checkpoint's model (weights loaded) and ``split`` encoded as it reads it."""
        providers = make_providers(meta["structures"], meta["structures"])
        vocab, examples = self.evaluation_data(meta, task, items, split, providers, quiet)
        model = self.build(task, len(vocab), meta["plan"], EncoderConfig(**meta["model"]), providers)
        model.load_state_dict(checkpoint["model"])
        return model, examples

    def rebuild_encoder(self, meta: Mapping[str, Any], task: Task) -> Any:
        providers = make_providers(meta["structures"], meta["structures"])
        vocab = Vocab.from_dict(meta["vocab"])
        config = EncoderConfig(**meta["model"])
        return (lambda: self.build(task, len(vocab), meta["plan"], config, providers).eval()), vocab, providers
