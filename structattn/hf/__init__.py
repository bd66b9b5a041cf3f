"""Structattn attention variants inside Hugging Face encoders (see docs/hf.md).

``attach(model, plan)`` puts variants into chosen layers through ``transformers.AttentionInterface``;
``StructureCollator`` turns sentences into the tokenizer's batch plus token-aligned structures;
``from_pretrained`` rebuilds a saved attached model; ``pretrain_mlm`` trains a small BERT offline.
"""

from structattn.hf.attach import attach, attached_layers
from structattn.hf.collator import Encoded, StructureCollator
from structattn.hf.families import supported_families
from structattn.hf.interface import structures
from structattn.hf.loading import from_pretrained
from structattn.hf.tokenizer import train_wordpiece

__all__ = ["Encoded", "StructureCollator", "attach", "attached_layers", "from_pretrained", "structures",
           "supported_families", "train_wordpiece"]
