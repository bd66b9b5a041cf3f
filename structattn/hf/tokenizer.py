"""Training a WordPiece tokenizer offline with ``tokenizers`` and wrapping it for ``transformers``."""

from __future__ import annotations

from typing import Iterable, Sequence

SPECIAL_TOKENS = {"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                  "mask_token": "[MASK]"}


def train_wordpiece(
    texts: Iterable[str | Sequence[str]], vocab_size: int = 2000, min_frequency: int = 1, lowercase: bool = False
):
    """A BERT-style WordPiece tokenizer (``[CLS] ... [SEP]``, ``##`` continuations) trained on ``texts``.

    Args:
        texts: raw lines, or pre-split sentences (lists of words; joined with spaces).
        vocab_size: target vocabulary size, special tokens included.
        min_frequency: least count of a merged piece.
        lowercase: lowercase (and strip accents) before splitting.

    Returns:
        a ``transformers.PreTrainedTokenizerFast`` (right padding; ``model_max_length`` unset).
    """
    from tokenizers.implementations import BertWordPieceTokenizer
    from tokenizers.processors import TemplateProcessing

    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    lines = [t if isinstance(t, str) else " ".join(t) for t in texts]
    if not any(line.strip() for line in lines):
        raise ValueError("train_wordpiece: no text to train on")
    wordpiece = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=lowercase, clean_text=True)
    wordpiece.train_from_iterator(lines, vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS.values()), show_progress=False)
    cls, sep = (SPECIAL_TOKENS[k] for k in ("cls_token", "sep_token"))
    wordpiece.post_processor = TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, wordpiece.token_to_id(cls)), (sep, wordpiece.token_to_id(sep))],
    )
    return _wrap(wordpiece._tokenizer)


def wordpiece_from_json(text: str):
    """The tokenizer :func:`train_wordpiece` returned, from its ``backend_tokenizer.to_str()``.

    ``tokenizers``' WordPiece trainer is not deterministic (continuation pieces get ids in hash-map order, which
    breaks ties between merges: huggingface/tokenizers#1794), so a trained tokenizer is stored, not retrained.
    """
    from tokenizers import Tokenizer

    return _wrap(Tokenizer.from_str(text))


def _wrap(backend):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=backend, padding_side="right",
                                   model_input_names=["input_ids", "token_type_ids", "attention_mask"], **SPECIAL_TOKENS)
