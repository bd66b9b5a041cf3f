"""Which Hugging Face encoder families ``attach`` supports, and where their self-attention modules are.

Every supported family computes its own q/k/v projections and then calls the function registered in
``transformers.AttentionInterface`` under ``config._attn_implementation`` (verified in the installed
``transformers`` 5 sources: ``modeling_bert.py``, ``modeling_roberta.py``, ``modeling_xlm_roberta.py``,
``modeling_electra.py``, ``modeling_distilbert.py``, ``modeling_camembert.py``). No family needs module
replacement; an architecture whose attention does not route through the interface (DeBERTa's
disentangled attention, ALBERT's weights shared across layers, ...) is refused by name.
"""

from __future__ import annotations

from typing import Any

from torch import nn

#: Self-attention class name -> family name (as listed in docs/hf.md).
SELF_ATTENTION_CLASSES = {
    "BertSelfAttention": "BERT",
    "RobertaSelfAttention": "RoBERTa",
    "XLMRobertaSelfAttention": "XLM-RoBERTa",
    "ElectraSelfAttention": "ELECTRA",
    "DistilBertSelfAttention": "DistilBERT",
    "CamembertSelfAttention": "CamemBERT",
}


def supported_families() -> list[str]:
    """Family names ``attach`` accepts."""
    return sorted(set(SELF_ATTENTION_CLASSES.values()))


def self_attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention module of every encoder layer, in layer order.

    Raises:
        ValueError: the model has no self-attention module of a supported family (the message names the model
            class and the supported families), or the number found differs from ``config.num_hidden_layers``.
    """
    found = [m for m in model.modules() if type(m).__name__ in SELF_ATTENTION_CLASSES]
    config = getattr(model, "config", None)
    if not found:
        raise ValueError(
            f"structattn.hf.attach does not support {type(model).__name__}: none of its modules is the "
            f"self-attention of a supported family ({', '.join(supported_families())}); its attention neither "
            "routes through transformers' AttentionInterface in a way structattn knows nor has a replacement"
        )
    expected = getattr(config, "num_hidden_layers", len(found))
    if len(found) != expected:
        raise ValueError(
            f"{type(model).__name__}: found {len(found)} self-attention modules but config.num_hidden_layers is "
            f"{expected} (shared or extra attention layers are not supported)"
        )
    return found


def head_dim(module: nn.Module) -> int:
    """d of one head of an HF self-attention module."""
    return int(module.attention_head_size)


def num_heads(module: nn.Module) -> int:
    """h of an HF self-attention module."""
    value = getattr(module, "num_attention_heads", None)
    return int(value if value is not None else module.n_heads)


def max_tokens(model: nn.Module, tokenizer: object | None = None) -> int:
    """The longest input ``model`` takes: its position table (less RoBERTa-style offsets, whose positions
    start after the padding index), capped by the tokenizer's ``model_max_length`` when that is set."""
    limit = position_limit(model.config.to_dict())
    own = getattr(tokenizer, "model_max_length", None)
    return min(limit, int(own)) if own is not None and own < 10**9 else limit


def position_limit(config: dict[str, Any]) -> int:
    """Tokens a model of this ``config.json`` (as a dict) can take: ``max_position_embeddings``, less the
    padding offset of RoBERTa-style families (positions start at ``pad_token_id + 1``).

    Raises:
        ValueError: the config has no ``max_position_embeddings``.
    """
    if "max_position_embeddings" not in config:
        raise ValueError(f"a {config.get('model_type', 'model')!r} config without max_position_embeddings: "
                         "its position limit is unknown")
    limit = int(config["max_position_embeddings"])
    if config.get("model_type") in ("roberta", "xlm-roberta", "camembert"):
        limit -= int(config.get("pad_token_id", 1)) + 1
    return limit
