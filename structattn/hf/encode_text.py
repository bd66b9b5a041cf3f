"""``encode_text(model, tokenizer, sentences)``: embeddings from an attached model, structures included.

transformers' pipelines (``pipeline("feature-extraction", model=attached)``) tokenize raw strings themselves
and call ``model(**inputs)`` with nothing else: no words to hang a parse on, no way to pass ``structures=``.
An attached layer then raises ``ValueError`` ("needs structure 'dependency', but the forward call carries no
structures"): pipelines are not a supported route. This function is: it collates parsed sentences with
:class:`~structattn.hf.collator.StructureCollator` and runs the model in batches.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import nn

from structattn.hf.collator import StructureCollator
from structattn.structures.providers import StructureProvider
from structattn.structures.sentence import Sentence

POOLINGS = ("token", "word", "mean")


def encode_text(
    model: nn.Module,
    tokenizer: Any,
    sentences: Sequence[Sentence],
    providers: Mapping[str, str | StructureProvider] | None = None,
    pooling: str = "word",
    batch_size: int = 16,
    global_tokens: str | Sequence[int] | None = None,
) -> list[torch.Tensor]:
    """The last hidden states of ``model`` for ``sentences``, one tensor per sentence, in order.

    The model runs in eval mode without gradients (its mode is restored afterwards).

    Args:
        model: an attached (or plain) transformers encoder, any head (the last of ``hidden_states`` is read).
        tokenizer: its fast tokenizer.
        sentences: parsed sentences carrying what the providers read (heads for ``dependency``); from a
            treebank (``structattn.structures.read_conllu``) or a parser (``structattn.structures.annotators``).
        providers: structure name -> provider, as :class:`StructureCollator` takes (default ``dependency``).
        pooling: ``"token"`` every real token, special tokens included; ``"word"`` each word's first token;
            ``"mean"`` the mean over real tokens (the sentence embedding all-MiniLM-L6-v2 is trained for).
        batch_size: sentences per forward call.
        global_tokens: passed to :class:`StructureCollator`.

    Returns:
        per sentence: (n_tokens, d) for ``token``, (n_words, d) for ``word``, (d,) for ``mean``.

    Raises:
        ValueError: an unknown pooling, ``batch_size < 1``, a string instead of a parsed ``Sentence`` (named),
            or anything :class:`StructureCollator` refuses.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"encode_text: pooling {pooling!r}; choose one of {POOLINGS}")
    if batch_size < 1:
        raise ValueError(f"encode_text: batch_size must be >= 1, got {batch_size}")
    for k, s in enumerate(sentences):
        if not isinstance(s, Sentence):
            raise ValueError(f"encode_text: sentence {k} is a {type(s).__name__} ({str(s)[:40]!r}), not a parsed "
                             "Sentence; parse raw text first (structattn.structures.annotators) so its structure exists")
    collator = StructureCollator(tokenizer, providers=providers, model=model, global_tokens=global_tokens)
    device = next(model.parameters()).device
    was_training, out = model.training, []
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(sentences), batch_size):
                out.extend(_encode_batch(model, collator, sentences[start: start + batch_size], pooling, device))
    finally:
        model.train(was_training)
    return out


def _encode_batch(model: nn.Module, collator: StructureCollator, sentences: Sequence[Sentence], pooling: str,
                  device: torch.device) -> list[torch.Tensor]:
    encoded = collator.encode(sentences)
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in encoded.batch.items()}
    hidden = model(**batch, output_hidden_states=True).hidden_states[-1]  # (b, n, d)
    real = batch["attention_mask"].bool()
    if pooling == "mean":
        summed = (hidden * real[..., None]).sum(1)
        return list((summed / real.sum(-1, keepdim=True)).cpu())
    if pooling == "token":
        return [hidden[k, real[k]].cpu() for k in range(hidden.shape[0])]
    index, word_mask = encoded.first_subtokens()  # (b, w)
    words = hidden.gather(1, index.to(device)[..., None].expand(-1, -1, hidden.shape[-1]))
    return [words[k, word_mask[k].to(device)].cpu() for k in range(hidden.shape[0])]
