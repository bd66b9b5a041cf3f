"""Which Hugging Face encoder families ``attach`` supports, and where their self-attention modules are.

Two routes (verified in the installed ``transformers`` 5 sources, ``models/<family>/modeling_<family>.py``):

* ``interface``: the family computes its own q/k/v projections and then calls the function registered in
  ``transformers.AttentionInterface`` under ``config._attn_implementation`` (BERT, RoBERTa, XLM-RoBERTa,
  ELECTRA, DistilBERT, CamemBERT, ModernBERT, ALBERT, and the encoders of T5, BART and Marian). What such a
  family adds to the scores reaches the attention function and is kept: T5's relative position bias
  (``position_bias``), ModernBERT's sliding window on its local layers (in the mask), ModernBERT's rotary
  positions (already applied to q and k).
* ``deberta``: DeBERTa-v2/v3's ``DisentangledSelfAttention`` computes its scores itself (no interface); the
  attached modules' class is replaced by :class:`structattn.hf.deberta.StructuredDisentangledSelfAttention`.

Refused, with the reason: a model whose self-attention is causal (``config.is_decoder``, a decoder-only
model, any self-attention module with ``is_causal``), DeBERTa v1, and every other architecture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from structattn.hf.auto_config import base_model_type


@dataclass(frozen=True)
class Family:
    """One supported family.

    Attributes:
        name: as listed in docs/hf.md.
        attention_class: the class name of its self-attention module.
        source: the ``transformers.models`` subpackage that defines the class (``"bert"``).
        route: ``"interface"`` (AttentionInterface) or ``"deberta"`` (class replaced, see module docstring).
        shared_layers: one module serves several layers (ALBERT): the plan must give every layer the same groups.
        model_terms: what the model itself adds to every score on some layers (kept; our bias is added on top),
            or ``""``. Layers with such terms accept only variants that add a bias or restrict keys
            (:func:`structattn.hf.model_terms.accepts_model_terms`).
        encoder_only: the family is the encoder of an encoder-decoder model; only its encoder stack is attached.
    """

    name: str
    attention_class: str
    source: str
    route: str = "interface"
    shared_layers: bool = False
    model_terms: str = ""
    encoder_only: bool = False

    def owns(self, module: nn.Module) -> bool:
        """Whether ``module`` (or a class it derives from) is this family's self-attention class."""
        where = f"transformers.models.{self.source}.modeling_{self.source}"
        return any(c.__name__ == self.attention_class and c.__module__ == where for c in type(module).__mro__)

    def layer_terms(self, module: nn.Module) -> str:
        """The model's own score terms on this layer (``""``: none)."""
        if self.name == "ModernBERT":
            return "" if getattr(module, "sliding_window", None) is None else self.model_terms
        if self.name == "DeBERTa-v2":
            return self.model_terms if getattr(module, "relative_attention", False) else ""
        return self.model_terms


FAMILIES = (
    Family("BERT", "BertSelfAttention", "bert"),
    Family("RoBERTa", "RobertaSelfAttention", "roberta"),
    Family("XLM-RoBERTa", "XLMRobertaSelfAttention", "xlm_roberta"),
    Family("ELECTRA", "ElectraSelfAttention", "electra"),
    Family("DistilBERT", "DistilBertSelfAttention", "distilbert"),
    Family("CamemBERT", "CamembertSelfAttention", "camembert"),
    Family("ModernBERT", "ModernBertAttention", "modernbert",
           model_terms="ModernBERT's sliding window (a local layer)"),
    Family("DeBERTa-v2", "DisentangledSelfAttention", "deberta_v2", route="deberta",
           model_terms="DeBERTa's disentangled c2p/p2c relative-position scores"),
    Family("ALBERT", "AlbertAttention", "albert", shared_layers=True),
    Family("T5 (encoder)", "T5Attention", "t5", model_terms="T5's relative position bias", encoder_only=True),
    Family("BART (encoder)", "BartAttention", "bart", encoder_only=True),
    Family("Marian (encoder)", "MarianAttention", "marian", encoder_only=True),
)

#: Self-attention class name -> family name (as listed in docs/hf.md).
SELF_ATTENTION_CLASSES = {f.attention_class: f.name for f in FAMILIES}

#: Known self-attention classes that are refused, with the reason.
REFUSED = {
    ("deberta", "DisentangledSelfAttention"): "DeBERTa (v1)'s disentangled attention computes its scores outside "
    "transformers' AttentionInterface and structattn wraps only DeBERTa-v2/v3's (DebertaV2Model)",
}

CAUSAL = ("its self-attention is causal (a decoder): structattn variants attend in both directions and handle only "
          "padding, so the causal mask would be lost")


def supported_families() -> list[str]:
    """Family names ``attach`` accepts."""
    return sorted(f.name for f in FAMILIES)


@dataclass
class Layers:
    """Where ``attach`` puts a model's variants.

    Attributes:
        family: the model's family.
        modules: the distinct self-attention modules, in layer order (ALBERT: the shared ones).
        stack: the module whose config routes attention: the model itself, or its encoder.
        num_layers: how many layers the plan is parsed against (ALBERT: ``num_hidden_layers``).
    """

    family: Family
    modules: list[nn.Module]
    stack: nn.Module
    num_layers: int


def family_of(module: nn.Module) -> Family | None:
    """The supported family whose self-attention ``module`` is, or ``None``."""
    return next((f for f in FAMILIES if f.owns(module)), None)


def find_layers(model: nn.Module) -> Layers:
    """The self-attention modules ``attach`` may use in ``model`` (an encoder-decoder model: its encoder's).

    Raises:
        ValueError: the model is causal (``config.is_decoder``, or a self-attention module with ``is_causal``),
            of a refused family, of no supported family, or its modules disagree with its config; the message
            names the model class and the reason.
    """
    who = type(model).__name__
    config = getattr(model, "config", None)
    if getattr(config, "is_decoder", False):
        raise ValueError(f"structattn.hf.attach refuses {who}: config.is_decoder=True, so {CAUSAL}")
    stack = model.get_encoder() if getattr(config, "is_encoder_decoder", False) and hasattr(model, "get_encoder") else model
    attention = [m for m in stack.modules() if type(m).__name__.endswith("Attention")]
    if getattr(stack.config, "is_decoder", False) or any(getattr(m, "is_causal", False) is True for m in attention):
        raise ValueError(f"structattn.hf.attach refuses {who}: {CAUSAL}")
    found = [m for m in stack.modules() if family_of(m) is not None]
    if not found:
        raise ValueError(f"structattn.hf.attach does not support {who}: {_why_not(stack)}")
    family = family_of(found[0])
    stack_config = stack.config
    expected = getattr(stack_config, "num_hidden_layers", len(found))
    if family.shared_layers:
        distinct = stack_config.num_hidden_groups * stack_config.inner_group_num
        if len(found) != distinct:
            raise ValueError(f"{who}: found {len(found)} self-attention modules, but num_hidden_groups x "
                             f"inner_group_num is {distinct}")
    elif len(found) != expected:
        raise ValueError(
            f"{who}: found {len(found)} self-attention modules but config.num_hidden_layers is "
            f"{expected} (shared or extra attention layers are not supported)"
        )
    return Layers(family, found, stack, expected)


def self_attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention module of every encoder layer, in layer order (ALBERT: the distinct, shared ones).

    Raises:
        ValueError: as :func:`find_layers`.
    """
    return find_layers(model).modules


def _why_not(model: nn.Module) -> str:
    """The reason a model without a supported self-attention module is refused."""
    for module in model.modules():
        source = type(module).__module__.rsplit(".", 1)[-1].removeprefix("modeling_")
        if (source, type(module).__name__) in REFUSED:
            return REFUSED[(source, type(module).__name__)]
    return (f"none of its modules is the self-attention of a supported family ({', '.join(supported_families())}); "
            "its attention neither routes through transformers' AttentionInterface in a way structattn knows "
            "nor has a replacement")


def head_dim(module: nn.Module) -> int:
    """d of one head of an HF self-attention module."""
    for name in ("attention_head_size", "head_dim", "key_value_proj_dim"):
        if getattr(module, name, None) is not None:
            return int(getattr(module, name))
    raise ValueError(f"{type(module).__name__}: no head size attribute")


def num_heads(module: nn.Module) -> int:
    """h of an HF self-attention module."""
    for name in ("num_attention_heads", "n_heads", "num_heads"):
        if getattr(module, name, None) is not None:
            return int(getattr(module, name))
    return int(module.config.num_attention_heads)  # ModernBERT keeps it on the config only


#: Model types whose positions are only relative (no table, so no length limit of their own).
RELATIVE_ONLY = ("t5",)
#: The limit of those (a tokenizer's "no limit" value, which the collator treats as none).
NO_POSITION_LIMIT = 10**9


def max_tokens(model: nn.Module, tokenizer: object | None = None) -> int:
    """The longest input ``model`` takes: its position table (less RoBERTa-style offsets, whose positions
    start after the padding index), capped by the tokenizer's ``model_max_length`` when that is set."""
    limit = position_limit(model.config.to_dict())
    own = getattr(tokenizer, "model_max_length", None)
    return min(limit, int(own)) if own is not None and own < 10**9 else limit


def position_limit(config: dict[str, Any]) -> int:
    """Tokens a model of this ``config.json`` (as a dict) can take: ``max_position_embeddings``, less the
    padding offset of RoBERTa-style families (positions start at ``pad_token_id + 1``).

    T5 has no position table (only relative position buckets): its limit is :data:`NO_POSITION_LIMIT`.

    Raises:
        ValueError: the config has no ``max_position_embeddings`` (and is not T5's).
    """
    model_type = base_model_type(str(config.get("model_type", "")))  # a saved attached model: its family's
    if "max_position_embeddings" not in config and model_type in RELATIVE_ONLY:
        return NO_POSITION_LIMIT
    if "max_position_embeddings" not in config:
        raise ValueError(f"a {config.get('model_type', 'model')!r} config without max_position_embeddings: "
                         "its position limit is unknown")
    limit = int(config["max_position_embeddings"])
    if model_type in ("roberta", "xlm-roberta", "camembert"):
        limit -= int(config.get("pad_token_id", 1)) + 1
    return limit
