"""The ``hf_seq2seq`` kind of run: a Hugging Face encoder (``hf(path=... | config=..., plan=...)`` settings, see
:mod:`structattn.experiments.hf_models`) under our decoder, on translation tasks (``output == "sequence"``).

* Encoder: the setting's HF model with its ``plan`` attached by :func:`structattn.hf.attach` (as the ``hf``
  kind builds it: :func:`~structattn.experiments.hf_models.build_hf_encoder`); the source side is tokenised
  with its tokenizer (a ``path=`` model's own; for ``config=`` a WordPiece trained on the train sources), word
  structures aligned to its sub-words (:func:`~structattn.experiments.hf_models.encode_data`'s way).
* Decoder: ours (:class:`~structattn.seq2seq.decoder.Decoder`: causal self-attention, cross-attention over the
  HF encoder's last hidden states), sized by the comparison's ``model.*`` (``d_model``, ``num_heads``,
  ``ffn_dim``, ``dropout``, ``positions``, ``max_len``) with ``task.seq2seq.decoder_layers`` (default
  ``model.num_layers``) layers, so that HF and from-scratch encoders of one comparison get the same decoder.
  When the HF width differs from ``model.d_model`` the encoder states pass through a new ``Linear(hidden_size,
  d_model)``; otherwise through nothing. The target side is the seq2seq kind's target vocabulary (the two kinds
  share their prepared data: ``data_kind = "seq2seq"``); ``shared_vocab`` cannot share an embedding with an HF
  encoder, so the decoder keeps its own target embedding (tied to its output projection as the task says).
* Training: :class:`~structattn.training.seq2seq.Seq2SeqTrainer`; the HF model's own weights train at the
  setting's ``pretrained_lr`` (default ``training.lr``; about 2e-5-1e-4 for a pretrained model), new parameters (decoder, projection, attached variants) at
  the setting's ``new_lr`` (default 1e-3), as :meth:`HFTaskModel.parameter_groups` splits them. The checkpoint
  is chosen on dev BLEU (greedy), the test set decoded with the task's beam; records carry the ``seq2seq``
  kind's keys (see :mod:`structattn.experiments.runners.seq2seq`).
* ``evaluate`` rebuilds the model from the checkpoint's ``meta`` (setting, stored tokenizer, target vocabulary)
  and scores a split as the run did. ``structattn translate`` reads these checkpoints (meta kind
  ``"hf_translation"``) too: sources tokenised by the model's tokenizer, structures aligned to its sub-words.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from structattn.encoders import EncoderConfig, Vocab
from structattn.encoders.encoder import EncoderOutput
from structattn.encoders.positions import make_positions
from structattn.experiments import hf_models
from structattn.hf.loading import transformers_quiet
from structattn.experiments.runners.base import Job, register_runner
from structattn.experiments.runners.seq2seq import Seq2SeqRunner, TranslationData, score_split
from structattn.experiments.spec import Setup, make_providers
from structattn.hf.attach import attached_layers
from structattn.seq2seq import PairExample, Seq2SeqModel, pair_batch, translate_examples
from structattn.seq2seq.config import Seq2SeqOptions
from structattn.seq2seq.decoder import Decoder
from structattn.seq2seq.layer import DecoderLayer
from structattn.seq2seq.subword import vocab_from_dict
from structattn.seq2seq.vocab import special_ids
from structattn.structures.providers.base import StructureProvider
from structattn.tasks.base import Item, Task
from structattn.training.seq2seq import teacher_forced_scores


class HFSourceEncoder(nn.Module):
    """An HF encoder (attached or not) behind the structattn encoder call, its states projected to the decoder's
    width.

    Args:
        model: the HF encoder (``model(input_ids=, attention_mask=, structures=)``).
        d_model: the decoder's width; a ``Linear(hidden_size, d_model)`` is added when it differs.

    Shapes:
        forward(input_ids (b, n), token_mask (b, n), structures) -> EncoderOutput(hidden (b, n, d_model)).
    """

    def __init__(self, model: nn.Module, d_model: int) -> None:
        super().__init__()
        width = model.config.hidden_size
        self.hf, self.d_model = model, d_model
        self.project: nn.Module = nn.Identity() if width == d_model else nn.Linear(width, d_model)

    def forward(self, input_ids: torch.Tensor, token_mask: torch.Tensor,
                structures: Mapping[str, Any] | None = None) -> EncoderOutput:
        out = self.hf(input_ids=input_ids, attention_mask=token_mask.long(), structures=dict(structures or {}))
        return EncoderOutput(self.project(out.last_hidden_state))  # (b, n, d_model)

    @property
    def layers(self) -> list[Any]:
        """Per layer, the attached head groups and variants (empty for the model's own layers), in the shape
        :func:`~structattn.experiments.inspect.bias_records` reads."""
        attached = attached_layers(self.hf)
        empty = SimpleNamespace(groups=[], variants=[])
        return [SimpleNamespace(attention=attached.get(k, empty)) for k in range(self.hf.config.num_hidden_layers)]


class HFSeq2SeqModel(Seq2SeqModel):
    """:class:`Seq2SeqModel` over an :class:`HFSourceEncoder`, with fine-tuning learning rates.

    Args:
        encoder, decoder, bos_id, eos_id: as :class:`Seq2SeqModel`.
        new_lr: learning rate of the parameters the HF model did not bring (decoder, projection, variants).
        pretrained_lr: learning rate of the HF model's own weights; None: ``training.lr``.
    """

    def __init__(self, encoder: HFSourceEncoder, decoder: Decoder, bos_id: int, eos_id: int,
                 new_lr: float = hf_models.NEW_LR, pretrained_lr: float | None = None) -> None:
        super().__init__(encoder, decoder, bos_id, eos_id)  # type: ignore[arg-type]
        hf_models.check_rates(new_lr, pretrained_lr)
        self.new_lr = new_lr
        self.pretrained_lr = pretrained_lr

    def parameter_groups(self, config: Any) -> list[dict[str, Any]]:
        """AdamW groups: the HF model's own weights (``encoder.hf.*`` outside attached variants) at
        :attr:`pretrained_lr` (None: ``config.lr``), everything else at :attr:`new_lr`; decay as :func:`structattn.training.param_groups.decays`
        decides (``config.weight_decay`` on weight matrices only)."""
        return hf_models.fine_tuning_groups(self, config,
                                            lambda name: not name.startswith("encoder.hf.") or ".structattn." in name,
                                            self.new_lr, self.pretrained_lr)


def build_hf_translation_model(setting: str, source_size: int, target_size: int, model: EncoderConfig,
                               options: Seq2SeqOptions, providers: Mapping[str, StructureProvider]) -> HFSeq2SeqModel:
    """The setting's HF encoder (plan attached; a ``config=`` model sized to ``source_size`` ids) and our decoder
    sized by ``model`` (see the module docstring).

    Raises:
        ValueError: a bad setting, or a plan whose variants need structure fields the providers lack.
    """
    hf = hf_models.build_model(_NoHead(), source_size, setting, providers).hf
    target_size = max(target_size, 4)  # validation builds with a 2-token vocabulary; targets need <s>, </s>
    embedding = nn.Embedding(target_size, model.d_model, padding_idx=0)
    nn.init.normal_(embedding.weight, std=model.d_model**-0.5)
    depth = options.decoder_layers or model.num_layers
    layers = [DecoderLayer(model.d_model, model.num_heads, model.ffn_dim, model.dropout) for _ in range(depth)]
    decoder = Decoder(embedding, make_positions(model.positions, model.d_model, model.max_len), layers, model.dropout,
                      options.tie_embeddings)
    rates = hf_models.learning_rates(hf_models.parse_setting(setting))
    return HFSeq2SeqModel(HFSourceEncoder(hf, model.d_model), decoder, 2, 3, **rates)


class _NoHead:
    """A stand-in task for :func:`hf_models.build_model` (its head is dropped: the decoder replaces it)."""

    output, num_labels = "sentence", 2


def hf_pairs(examples: Sequence[Any], targets: Sequence[PairExample]) -> list[PairExample]:
    """Source ``examples`` (HF tokens, aligned structures) paired with the target ids of ``targets``."""
    return [PairExample(e.input_ids, e.structures, t.target_ids, e.id) for e, t in zip(examples, targets)]


def encode_sources(setting: str, data: TranslationData, providers: Mapping[str, StructureProvider],
                   quiet: bool = True) -> TranslationData:
    """``data`` with sources re-tokenised by the setting's tokenizer (``vocab`` becomes its
    :class:`~structattn.experiments.hf_models.HFVocab`); targets as they were."""
    encoded = hf_models.encode_data(setting, data, providers, quiet)
    return dataclasses.replace(data, vocab=encoded.vocab, examples={
        split: hf_pairs(encoded.examples[split], data.examples[split]) for split in data.items})


@register_runner("hf_seq2seq")
class HFSeq2SeqRunner(Seq2SeqRunner):
    """An HF encoder (``hf(...)`` settings, plan attached) and our decoder on translation tasks; data shared with
    the ``seq2seq`` kind, sources re-tokenised per setting."""

    setting = "hf"
    outputs = ("sequence",)
    data_kind = "seq2seq"
    rebuild_refusal = "probe reads encoder-only models, and this is a translation model with an HF encoder"

    def structures(self, plan: str, model: EncoderConfig) -> set[str]:
        return hf_models.plan_structures(plan)

    def check(self, task: Task, plan: str, setup: Setup, providers: Mapping[str, StructureProvider]) -> None:
        with transformers_quiet():  # a build before any run: no "Loading weights" bar per setting
            build_hf_translation_model(plan, 2, 2, setup.model, task.seq2seq, providers)  # type: ignore[attr-defined]

    def dry_run(self, task: Task, plan: str, setup: Setup, items: Sequence[Item]) -> None:
        """Build the model, run it forward and through one greedy decoding on ``items``."""
        providers = make_providers(self.structures(plan, setup.model), setup.structures)
        data = self.prepare(task, providers, setup.vocab, quiet=True, items={"train": list(items), "test": list(items)})
        data = encode_sources(plan, data, providers)
        model = build_hf_translation_model(plan, len(data.vocab), len(data.target_vocab), setup.model,
                                           data.task.seq2seq, providers).eval()
        with torch.no_grad():
            logits = model(pair_batch(data.examples["train"], *special_ids(data.target_vocab)))
        if not torch.isfinite(logits).all():
            raise ValueError("non-finite outputs in a forward pass")
        translate_examples(model, data.examples["train"], data.task.seq2seq, beam=1)

    def meta(self, job: Job) -> dict[str, Any]:
        return {**super().meta(job), "kind": "hf_translation"}

    def encoded_job(self, job: Job) -> Job:
        """The job with its sources re-tokenised by the setting's tokenizer (structures aligned to its pieces)."""
        return dataclasses.replace(job, data=encode_sources(job.spec.plan, job.data, job.providers, job.quiet))

    def build_model(self, job: Job) -> Seq2SeqModel:
        data = job.data
        return build_hf_translation_model(job.spec.plan, len(data.vocab), len(data.target_vocab), job.setup.model,
                                          data.task.seq2seq, job.providers)

    def train(self, job: Job) -> dict[str, Any]:
        with transformers_quiet(job.quiet):
            return super().train(job)

    def evaluate(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                 items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, float]:
        """Rebuild the checkpoint's model (setting, the tokenizer it trained with, target vocabulary, decoder
        sizes) and score ``split`` as the run did: teacher-forced ``loss`` / ``accuracy`` and beam ``bleu`` /
        ``chrf`` (see :func:`~structattn.experiments.runners.seq2seq.score_split`)."""
        with transformers_quiet(quiet):
            return self._evaluate(checkpoint, meta, task, items, split, quiet)

    def _evaluate(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                  items: Mapping[str, list[Item]], split: str, quiet: bool) -> dict[str, float]:
        if meta.get("kind") != "hf_translation":
            raise ValueError(f"run {meta.get('run_id', '?')}: not an hf_seq2seq checkpoint (meta kind "
                             f"{meta.get('kind')!r})")
        providers = make_providers(meta["structures"], meta["structures"])
        vocab, encoded = hf_models.evaluation_data(meta["plan"], task, items, split, providers,
                                                   meta["vocab"].get("tokenizer"), quiet)
        target: Vocab = vocab_from_dict(meta["target_vocab"])
        pairs = [PairExample(e.input_ids, e.structures, target.encode(task.label(x))[0], e.id)
                 for e, x in zip(encoded, items[split])]
        data = TranslationData(task, vocab, target, {split: items[split]}, {split: pairs})  # type: ignore[arg-type]
        model = build_hf_translation_model(meta["plan"], len(vocab), len(target), EncoderConfig(**meta["model"]),
                                           Seq2SeqOptions(**meta["seq2seq"]), providers)
        model.load_state_dict(checkpoint["model"])
        scores = teacher_forced_scores(model, data.examples[split])
        scored = score_split(model, data, split, beam=data.task.seq2seq.beam, quiet=quiet)
        return {**scores, **scored.metrics}
