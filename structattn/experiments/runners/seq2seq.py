"""The ``seq2seq`` kind of run: our encoder-decoder (any encoder plan) on translation tasks (``output ==
"sequence"``: ``translation_synthetic(...)``, ``translation_pud(...)``, ``translation_multi30k(...)``).

Records carry the same keys as classification records:

* ``metrics``: ``bleu`` and ``chrf`` (test set, beam search with the task's beam / length penalty),
  ``dev_bleu`` (best dev BLEU of greedy decoding, which picks the checkpoint; never the test set),
  ``test_accuracy`` / ``dev_accuracy`` (teacher-forced next-token accuracy: what the shared results table and
  plots read), ``test_loss``; no ``majority_baseline``.
* ``bias``: the encoder's learned bias per distance bucket per layer.
* ``predictions``: every test hypothesis and its reference (paired significance tests), and ``samples``:
  the first five.

Two ways of scoring, chosen by the data:

* Items with raw reference lines (``meta["target_text"]``: Multi30k) are scored as papers report them:
  ``bleu`` is cased sacreBLEU of the Moses-detokenised hypotheses against the raw references, ``chrf`` beside
  it, and ``bleu_tok_lower`` is lowercased BLEU of the tokenised hypotheses against the target tokens
  (:mod:`structattn.seq2seq.metrics`); the record gets ``scores_signature`` (sacrebleu's signature of each), and
  ``predictions`` hold the detokenised hypotheses and the raw references, so that significance tests recompute
  the same BLEU. Dev BLEU (checkpoint choice) is the same detokenised sacreBLEU, greedy.
* Other tasks (synthetic, PUD): hypotheses and references are tokens joined with spaces
  (:func:`~structattn.seq2seq.metrics.corpus_scores`).

Vocabularies (``Setup.vocab``, gin ``data.*``): word-level (:meth:`Vocab.build`), fixed-size chunks
(``subword_chars``), or learned subwords (``subword_model`` ``"bpe"`` / ``"unigram"`` with ``subword_size``:
:meth:`~structattn.seq2seq.subword.SubwordVocab.train` on the train split only, one joint vocabulary with the
task's ``shared_vocab``). Word-level trees reach subword pieces through
:func:`~structattn.structures.alignment.align_to_subwords`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from structattn.encoders import ChunkSplitter, EncoderConfig, Vocab
from structattn.experiments.inspect import bias_records
from structattn.experiments.provenance import data_checksum
from structattn.experiments.runners.base import Job, Runner, register_runner
from structattn.experiments.runners.encoder import plan_structure_names
from structattn.experiments.spec import Setup, make_providers, only_structures
from structattn.experiments.translate_command import translator_from
from structattn.seq2seq import PairExample, Seq2SeqModel, build_seq2seq, pair_batch, translate_examples
from structattn.seq2seq.metrics import corpus_scores, detokenize_words, sacrebleu_scores, tokenized_lower_bleu
from structattn.seq2seq.subword import SubwordVocab
from structattn.seq2seq.vocab import detokenize, reference_text, special_ids, target_vocab
from structattn.structures.cache import StructureCache
from structattn.structures.providers.base import StructureProvider
from structattn.tasks.base import Item, Task
from structattn.tasks.translation import TranslationTask
from structattn.training import encode_items
from structattn.training.seq2seq import Seq2SeqTrainer, teacher_forced_scores


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
    """Source and target vocabularies of the train pairs (one shared vocabulary with ``shared_vocab``):
    learned subwords when ``options`` name a ``subword_model`` (see :func:`subword_vocabs`), else counted
    words or ``subword_chars`` chunks."""
    options = dict(options)
    if "subword_model" in options or "subword_size" in options:
        return subword_vocabs(task, train, options)
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


def subword_vocabs(task: TranslationTask, train: list[Item], options: Mapping[str, Any]) -> tuple[Vocab, Vocab]:
    """BPE or unigram vocabularies (:meth:`SubwordVocab.train`) of the train pairs only: one trained on sources
    and targets together with ``shared_vocab``, else one per side.

    Args:
        options: ``subword_model`` (default ``"bpe"``), ``subword_size`` (pieces, specials included; default
            8000), ``lowercase``; ``min_freq`` is the counted vocabularies' option and is not used.

    Raises:
        ValueError: ``subword_chars`` or ``max_size`` given too (name the conflict), or a bad model / size.
    """
    options = dict(options)
    clash = sorted(k for k in ("subword_chars", "max_size") if options.get(k))
    if clash:
        raise ValueError(f"vocabulary options {clash} cannot go with subword_model: the trained vocabulary's size "
                         f"is subword_size (got {options})")
    model, size = options.get("subword_model") or "bpe", options.get("subword_size") or 8000
    lowercase = bool(options.get("lowercase", True))
    sources, targets = [task.inputs(x) for x in train], [task.label(x) for x in train]
    if task.seq2seq.shared_vocab:
        shared = SubwordVocab.train(sources + targets, vocab_size=size, model=model, lowercase=lowercase)
        return shared, shared
    return (SubwordVocab.train(sources, vocab_size=size, model=model, lowercase=lowercase),
            SubwordVocab.train(targets, vocab_size=size, model=model, lowercase=lowercase))


def prepare_translation(task: TranslationTask, providers: Mapping[str, StructureProvider],
                        vocab_options: Mapping[str, Any], quiet: bool = False, vocab: Vocab | None = None,
                        items: dict[str, list[Item]] | None = None, cache_dir: str | None = None,
                        target: Vocab | None = None) -> TranslationData:
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
    return TranslationData(task, vocab, target, items, examples, checksum=data_checksum(items))


def build_translation_model(task: TranslationTask, source_size: int, target_size: int, plan: str,
                            model: EncoderConfig, providers: Mapping[str, StructureProvider]) -> Seq2SeqModel:
    """Encoder (plan checked against the providers' fields) and decoder with the task's seq2seq options."""
    fields = {name: p.provides for name, p in providers.items()}
    target_size = max(target_size, 4)  # validation builds with a 2-token vocabulary; targets need <s>, </s>
    source_size = target_size if task.seq2seq.shared_vocab else source_size
    return build_seq2seq(model, task.seq2seq, plan, source_size, target_size, fields, 2, 3)


def translate_split(model: Seq2SeqModel, data: TranslationData, split: str, *, beam: int, device: Any = "cpu",
                    quiet: bool = True) -> tuple[list[str], list[str]]:
    """``split`` decoded with ``beam`` (1: greedy): the hypotheses and their references, as text (tokens joined
    with spaces)."""
    ids = translate_examples(model, data.examples[split], data.task.seq2seq, beam=beam, device=device, quiet=quiet,
                             desc=f"translate {split}")
    hyps = [detokenize(h, data.target_vocab) for h in ids]
    refs = [reference_text(data.task.label(x), data.target_vocab) for x in data.items[split]]
    return hyps, refs


@dataclass
class Scored:
    """A split decoded and scored: ``metrics`` (``bleu``, ``chrf``, and ``bleu_tok_lower`` for raw
    references), the hypotheses and references the scores read, and sacrebleu's signatures (raw references
    only, else empty)."""

    metrics: dict[str, float]
    hyps: list[str]
    refs: list[str]
    signature: dict[str, str]


def has_raw_references(items: Sequence[Item]) -> bool:
    """Whether every item carries its raw reference line (``meta["target_text"]``)."""
    return bool(items) and all(isinstance(x.meta.get("target_text"), str) for x in items)


def hypothesis_words(ids: Sequence[int], vocab: Vocab) -> list[str]:
    """The target words of hypothesis ``ids`` (``##`` pieces glued to the piece before), exactly the words
    ``structattn translate`` writes (:func:`~structattn.seq2seq.vocab.detokenize`, for every kind of
    vocabulary)."""
    return detokenize(ids, vocab).split()


def target_language(task: TranslationTask) -> str:
    """The target language code the Moses detokeniser needs (the task's ``tgt``)."""
    lang = getattr(task, "tgt", None)
    if not isinstance(lang, str):
        raise ValueError(f"task {task.name!r}: its items carry raw references (meta['target_text']) but the task "
                         f"names no target language (attribute 'tgt') to detokenise hypotheses with")
    return lang


def score_split(model: Seq2SeqModel, data: TranslationData, split: str, *, beam: int, device: Any = "cpu",
                quiet: bool = True) -> Scored:
    """``split`` decoded with ``beam`` (1: greedy) and scored as the module docstring says (raw references:
    detokenised sacreBLEU, chrF and tokenised lowercased BLEU; otherwise tokenised BLEU and chrF)."""
    items = data.items[split]
    if not has_raw_references(items):
        hyps, refs = translate_split(model, data, split, beam=beam, device=device, quiet=quiet)
        return Scored(corpus_scores(hyps, refs), hyps, refs, {})
    ids = translate_examples(model, data.examples[split], data.task.seq2seq, beam=beam, device=device, quiet=quiet,
                             desc=f"translate {split}")
    words = [hypothesis_words(h, data.target_vocab) for h in ids]
    lang = target_language(data.task)
    hyps, refs = [detokenize_words(w, lang) for w in words], [x.meta["target_text"] for x in items]
    cased = sacrebleu_scores(hyps, refs)
    tokenised = tokenized_lower_bleu(words, [data.task.label(x) for x in items])
    metrics = {"bleu": cased["bleu"], "chrf": cased["chrf"], "bleu_tok_lower": tokenised["bleu_tok_lower"]}
    signature = {"bleu": cased["bleu_signature"], "chrf": cased["chrf_signature"],
                 "bleu_tok_lower": tokenised["bleu_tok_lower_signature"]}
    return Scored(metrics, hyps, refs, signature)


def score_translations(model: Seq2SeqModel, data: TranslationData, split: str, *, beam: int, device: Any = "cpu",
                       quiet: bool = True) -> tuple[dict[str, float], list[str]]:
    """The scores of ``split`` decoded with ``beam`` (1: greedy; see :func:`score_split`), and the hypotheses."""
    scored = score_split(model, data, split, beam=beam, device=device, quiet=quiet)
    return scored.metrics, scored.hyps


@register_runner("seq2seq")
class Seq2SeqRunner(Runner):
    """Our encoder (the setting's attention plan) and decoder, trained with label smoothing; the checkpoint is
    chosen on dev BLEU (greedy), the test set decoded with the task's beam."""

    outputs = ("sequence",)
    rebuild_refusal = "probe reads encoder-only models, and this is a translation model"

    def structures(self, plan: str, model: EncoderConfig) -> set[str]:
        return plan_structure_names(plan, model)

    def prepare(self, task: Task, providers: Mapping[str, StructureProvider], vocab_options: Mapping[str, Any], *,
                quiet: bool = False, items: dict[str, list[Item]] | None = None,
                cache_dir: str | None = None) -> TranslationData:
        return prepare_translation(task, providers, vocab_options, quiet, items=items, cache_dir=cache_dir)  # type: ignore[arg-type]

    def check(self, task: Task, plan: str, setup: Setup, providers: Mapping[str, StructureProvider]) -> None:
        build_translation_model(task, 2, 2, plan, setup.model, providers)  # type: ignore[arg-type]

    def dry_run(self, task: Task, plan: str, setup: Setup, items: Sequence[Item]) -> None:
        """Build the model and run it forward and through one greedy decoding on ``items``."""
        providers = make_providers(self.structures(plan, setup.model), setup.structures)
        data = self.prepare(task, providers, setup.vocab, quiet=True, items={"train": list(items), "test": list(items)})
        model = build_translation_model(data.task, len(data.vocab), len(data.target_vocab), plan, setup.model,
                                        providers).eval()
        with torch.no_grad():
            logits = model(pair_batch(data.examples["train"], *special_ids(data.target_vocab)))
        if not torch.isfinite(logits).all():
            raise ValueError("non-finite outputs in a forward pass")
        translate_examples(model, data.examples["train"], data.task.seq2seq, beam=1)

    def meta(self, job: Job) -> dict[str, Any]:
        data = job.data
        detokenized = has_raw_references(data.items.get("test", []))  # scored on text: translate writes text
        return {"kind": "translation", **super().meta(job), "seq2seq": data.task.seq2seq.to_dict(),
                "target_vocab": data.target_vocab.to_dict(), "parser": data.task.parser,
                "target_language": target_language(data.task) if detokenized else None}

    def encoded_job(self, job: Job) -> Job:
        """The job with its data as this kind's model reads it (here: as prepared)."""
        return job

    def build_model(self, job: Job) -> Seq2SeqModel:
        """The untrained model of the job's setting, sized by its (encoded) data."""
        data = job.data
        return build_translation_model(data.task, len(data.vocab), len(data.target_vocab), job.spec.plan,
                                       job.setup.model, job.providers)

    def train(self, job: Job) -> dict[str, Any]:
        job = self.encoded_job(job)
        spec, setup, data, device = job.spec, job.setup, job.data, job.context.device
        model = self.build_model(job)
        view = dataclasses.replace(data, examples={k: [only_structures(e, job.names) for e in xs]
                                                   for k, xs in data.examples.items()})
        dev_score = lambda m: score_translations(m, view, "dev", beam=1, device=device)[0]["bleu"]  # noqa: E731
        trainer = Seq2SeqTrainer(model, setup.training, label_smoothing=data.task.seq2seq.label_smoothing,
                                 seed=spec.seed, device=device, dev_score=dev_score, quiet=job.quiet,
                                 checkpoint_dir=job.checkpoint_dir, run_id=spec.run_id,
                                 checkpoint_extra={"config": job.config, "meta": self.meta(job)})
        result = trainer.fit(view.examples["train"], view.examples["dev"], resume=job.resume)
        test = trainer.evaluate(view.examples["test"])
        scored = score_split(model, view, "test", beam=data.task.seq2seq.beam, device=device, quiet=job.quiet)
        hyps, refs = scored.hyps, scored.refs
        if job.out_dir is not None:
            job.out_dir.mkdir(parents=True, exist_ok=True)
            (job.out_dir / "test.hyp.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        metrics = {**scored.metrics, "dev_bleu": result.best_metric, "test_accuracy": test["accuracy"],
                   "dev_accuracy": trainer.evaluate(view.examples["dev"])["accuracy"], "test_loss": test["loss"]}
        ids = [x.id for x in data.items["test"]]
        record = {"metrics": metrics, "history": result.history, "best_step": result.best_step, "steps": result.steps,
                  "stopped_early": result.stopped_early, "earlier_s": result.earlier_s,
                  "num_parameters": sum(p.numel() for p in model.parameters()),
                  "bias": bias_records(model), "heatmap": None,
                  "predictions": {"split": "test", "ids": ids, "hyp": hyps, "ref": refs},
                  "samples": [{"id": i, "hyp": h, "ref": r} for i, h, r in list(zip(ids, hyps, refs))[:5]]}
        return {**record, "scores_signature": scored.signature} if scored.signature else record

    def evaluate(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                 items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, float]:
        """Score the checkpoint (rebuilt as ``structattn translate`` rebuilds it: plan, model, both vocabularies)
        on ``split`` as the run did: teacher-forced ``loss`` and ``accuracy``, and ``bleu`` / ``chrf`` (plus
        ``bleu_tok_lower`` for raw references, see :func:`score_split`) of beam search with the task's beam and
        length penalty."""
        loaded = translator_from(checkpoint)
        data = prepare_translation(task, loaded.providers, {}, quiet=quiet, vocab=loaded.source,  # type: ignore[arg-type]
                                   target=loaded.target, items={split: items[split]})
        scores = teacher_forced_scores(loaded.model, data.examples[split])
        scored = score_split(loaded.model, data, split, beam=data.task.seq2seq.beam, quiet=quiet)
        return {**scores, **scored.metrics}
