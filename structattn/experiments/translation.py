"""Translation runs inside ``structattn compare``: data encoding, model building, training, BLEU / chrF.

``run.py`` and ``compare.py`` hand every task whose ``output`` is ``"sequence"`` to the functions here, so a
comparison config lists translation tasks (``translation_synthetic(...)``, ``translation_pud(...)``) like any
other task. Records carry the same keys as classification records:

* ``metrics``: ``bleu`` and ``chrf`` (test set, beam search with the task's beam / length penalty),
  ``dev_bleu`` (best dev BLEU of greedy decoding, which picks the checkpoint), ``test_accuracy`` /
  ``dev_accuracy`` (teacher-forced next-token accuracy: what the shared results table and plots read),
  ``test_loss``; no ``majority_baseline``.
* ``bias``: the encoder's learned bias per distance bucket per layer (:func:`bias_records`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import torch

from structattn.encoders import ChunkSplitter, EncoderConfig, Vocab
from structattn.experiments.inspect import bias_records
from structattn.seq2seq import PairExample, Seq2SeqModel, build_seq2seq, translate_examples
from structattn.seq2seq.metrics import corpus_scores
from structattn.seq2seq.vocab import detokenize, reference_text, special_ids, target_vocab
from structattn.structures.cache import StructureCache
from structattn.structures.providers.base import StructureProvider
from structattn.tasks.base import Item
from structattn.tasks.translation import TranslationTask
from structattn.training import Distributed, encode_items, seed_everything
from structattn.training.seq2seq import Seq2SeqTrainer, teacher_forced_scores

if TYPE_CHECKING:
    from structattn.experiments.run import RunSpec, Setup


@dataclass
class TranslationData:
    """A translation task's items encoded once: source and target vocabularies, pairs per split."""

    task: TranslationTask
    vocab: Vocab
    target_vocab: Vocab
    items: dict[str, list[Item]]
    examples: dict[str, list[PairExample]]
    baseline: float | None = None
    checksum: str = ""  #: :func:`structattn.experiments.provenance.data_checksum` of ``items``


def make_vocabs(task: TranslationTask, train: list[Item], options: Mapping[str, Any]) -> tuple[Vocab, Vocab]:
    """Source and target vocabularies of the train pairs (one shared vocabulary with ``shared_vocab``)."""
    options = dict(options)
    chars = options.pop("subword_chars", None)
    splitter = ChunkSplitter(chars) if chars else None
    sources, targets = [task.inputs(x) for x in train], [task.label(x) for x in train]
    try:
        if task.seq2seq.shared_vocab:
            shared = target_vocab(sources + targets, splitter=splitter, **options)
            return shared, shared
        source = Vocab.build(sources, splitter=splitter, **options)
        return source, target_vocab(targets, splitter=splitter, **options)
    except TypeError as err:
        raise ValueError(f"bad vocabulary options {options}: {err}") from None


def prepare_translation(task: TranslationTask, providers: Mapping[str, StructureProvider], vocab_options: Mapping[str, Any],
                        quiet: bool = False, vocab: Vocab | None = None, items: dict[str, list[Item]] | None = None,
                        cache_dir: str | None = None, target: Vocab | None = None) -> TranslationData:
    """Load the splits, build the vocabularies on train (unless given), encode sources (with structures,
    through the disk cache when given) and targets."""
    items = items if items is not None else task.splits()
    if vocab is None or target is None:
        vocab, target = make_vocabs(task, items["train"], vocab_options)
    cache = None if cache_dir is None else StructureCache(cache_dir)
    examples = {}
    for split, xs in items.items():
        encoded = encode_items(xs, task, vocab, providers, quiet=quiet, desc=f"preprocess {split}", cache=cache)
        examples[split] = [PairExample(e.input_ids, e.structures, target.encode(task.label(x))[0], e.id)
                           for e, x in zip(encoded, xs)]
    from structattn.experiments.provenance import data_checksum

    return TranslationData(task, vocab, target, items, examples, checksum=data_checksum(items))


def build_translation_model(task: TranslationTask, source_size: int, target_size: int, plan: str, model: EncoderConfig,
                            providers: Mapping[str, StructureProvider]) -> Seq2SeqModel:
    """Encoder (plan checked against the providers' fields) and decoder with the task's seq2seq options."""
    fields = {name: p.provides for name, p in providers.items()}
    target_size = max(target_size, 4)  # validation builds with a 2-token vocabulary; targets need <s>, </s>
    source_size = target_size if task.seq2seq.shared_vocab else source_size
    return build_seq2seq(model, task.seq2seq, plan, source_size, target_size, fields, 2, 3)


def score_translations(model: Seq2SeqModel, data: TranslationData, split: str, *, beam: int, device: Any = "cpu",
                       quiet: bool = True) -> tuple[dict[str, float], list[str]]:
    """BLEU and chrF of ``split`` decoded with ``beam`` (1: greedy), and the hypotheses."""
    ids = translate_examples(model, data.examples[split], data.task.seq2seq, beam=beam, device=device, quiet=quiet,
                             desc=f"translate {split}")
    hyps = [detokenize(h, data.target_vocab) for h in ids]
    refs = [reference_text(data.task.label(x), data.target_vocab) for x in data.items[split]]
    return corpus_scores(hyps, refs), hyps


def run_meta(spec: "RunSpec", setup: "Setup", data: TranslationData, names: set[str]) -> dict[str, Any]:
    """How to rebuild the model and its input pipeline (stored in every checkpoint)."""
    from structattn import plugins
    from structattn.experiments.run import _plain

    return {"kind": "translation", "task": spec.task, "task_options": _plain(data.task.options()), "plan": spec.plan,
            "structures": {n: setup.structures.get(n, n) for n in names}, "model": setup.model.to_dict(),
            "seq2seq": data.task.seq2seq.to_dict(), "vocab": data.vocab.to_dict(),
            "target_vocab": data.target_vocab.to_dict(), "parser": data.task.parser, "seed": spec.seed,
            "run_id": spec.run_id, "data_sha256": data.checksum, "plugins": plugins.loaded()}


def execute_translation(spec: "RunSpec", setup: "Setup", data: TranslationData, *, out_dir: Path | None = None,
                        context: Distributed = Distributed(), quiet: bool = False, config: str = "",
                        resume: Path | None = None) -> dict[str, Any]:
    """Train and evaluate one translation run; return its record (JSON-ready), checkpoints under ``out_dir``."""
    from structattn.experiments.provenance import Stopwatch
    from structattn.experiments.run import _only, make_providers, plan_structures, run_provenance

    start, watch = time.perf_counter(), Stopwatch()
    seed_everything(spec.seed)
    names = plan_structures(spec.plan, setup.model)
    providers = make_providers(names, setup.structures)
    model = build_translation_model(data.task, len(data.vocab), len(data.target_vocab), spec.plan, setup.model, providers)
    view = dataclasses.replace(data, examples={k: [_only(e, names) for e in xs] for k, xs in data.examples.items()})
    dev_score = lambda m: score_translations(m, view, "dev", beam=1, device=context.device)[0]["bleu"]  # noqa: E731
    trainer = Seq2SeqTrainer(model, setup.training, label_smoothing=data.task.seq2seq.label_smoothing, seed=spec.seed,
                             device=context.device, dev_score=dev_score, quiet=quiet,
                             checkpoint_dir=None if out_dir is None else out_dir / "checkpoints",
                             checkpoint_extra={"config": config, "meta": run_meta(spec, setup, data, names)})
    result = trainer.fit(view.examples["train"], view.examples["dev"], resume=resume)
    test = trainer.evaluate(view.examples["test"])
    scores, hyps = score_translations(model, view, "test", beam=data.task.seq2seq.beam, device=context.device, quiet=quiet)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "test.hyp.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    metrics = {"bleu": scores["bleu"], "chrf": scores["chrf"], "dev_bleu": result.best_metric,
               "test_accuracy": test["accuracy"], "dev_accuracy": trainer.evaluate(view.examples["dev"])["accuracy"],
               "test_loss": test["loss"]}
    return {**asdict(spec), "run_id": spec.run_id, "metric": data.task.metric, "metrics": metrics,
            "history": result.history, "best_step": result.best_step, "steps": result.steps,
            "stopped_early": result.stopped_early, "num_parameters": sum(p.numel() for p in model.parameters()),
            "bias": bias_records(model), "heatmap": None, "time_s": time.perf_counter() - start,
            "provenance": run_provenance(spec, data, watch),  # type: ignore[arg-type]
            "samples": [{"id": x.id, "hyp": h, "ref": reference_text(data.task.label(x), data.target_vocab)}
                        for x, h in list(zip(data.items["test"], hyps))[:5]]}


def evaluate_translation(checkpoint: Mapping[str, Any], task: TranslationTask, items: Mapping[str, list[Item]],
                         split: str, quiet: bool = False) -> dict[str, float]:
    """Score a translation checkpoint (rebuilt as ``structattn translate`` rebuilds it: plan, model, both
    vocabularies) on ``split`` as the run did: teacher-forced ``loss`` and ``accuracy``, and ``bleu`` / ``chrf``
    of beam search with the task's beam and length penalty."""
    from structattn.experiments.translate_command import translator_from

    loaded = translator_from(checkpoint)
    data = prepare_translation(task, loaded.providers, {}, quiet=quiet, vocab=loaded.source, target=loaded.target,
                               items={split: items[split]})
    scores = teacher_forced_scores(loaded.model, data.examples[split])
    bleu, _ = score_translations(loaded.model, data, split, beam=task.seq2seq.beam, quiet=quiet)
    return {**scores, "bleu": bleu["bleu"], "chrf": bleu["chrf"]}


def dry_run_translation(task: TranslationTask, plan: str, setup: "Setup", items_per_task: int = 2) -> None:
    """Build the model and run it forward and through one greedy decoding on the first train pairs."""
    from structattn.experiments.run import make_providers, plan_structures
    from structattn.seq2seq import pair_batch

    items = task.splits()["train"][:items_per_task]
    providers = make_providers(plan_structures(plan, setup.model), setup.structures)
    data = prepare_translation(task, providers, setup.vocab, quiet=True, items={"train": items, "test": items})
    model = build_translation_model(task, len(data.vocab), len(data.target_vocab), plan, setup.model, providers).eval()
    with torch.no_grad():
        logits = model(pair_batch(data.examples["train"], *special_ids(data.target_vocab)))
    if not torch.isfinite(logits).all():
        raise ValueError(f"plan {plan!r} on task {task.name!r}: non-finite outputs in a forward pass")
    translate_examples(model, data.examples["train"], task.seq2seq, beam=1)
