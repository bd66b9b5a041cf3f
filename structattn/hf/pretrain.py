"""Masked-language-model pretraining of a small BERT, offline: WordPiece tokenizer, config, training, saving."""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import torch

from structattn.hf.attach import attach
from structattn.hf.collator import StructureCollator
from structattn.hf.pretrain_config import PretrainConfig
from structattn.hf.tokenizer import train_wordpiece
from structattn.progress import progress_bar
from structattn.structures.sentence import Sentence


def pretrain_mlm(
    data: Sequence[str] | Sequence[Sentence],
    out: str | Path | None = None,
    plan: str | None = None,
    config: PretrainConfig = PretrainConfig(),
    progress: bool = True,
) -> tuple[Any, Any, list[float]]:
    """Train a tokenizer on ``data``, build a BERT of ``config``'s sizes, MLM-pretrain it, save it to ``out``.

    Args:
        data: raw lines, or :class:`Sentence` objects (needed when ``plan`` names structures: each batch then
            carries their structures, aligned by :class:`~structattn.hf.StructureCollator`).
        out: directory for ``save_pretrained`` of the model and the tokenizer, plus ``pretrain.json`` (config
            and loss curve); nothing is written when ``None``.
        plan: an attention plan attached before training (``None``: the plain BERT).
        config: sizes and schedule.
        progress: show a tqdm bar.

    Returns:
        ``(model, tokenizer, losses)``: a ``BertForMaskedLM`` in eval mode, its tokenizer, the loss of each step.
    """
    from transformers import BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling

    sentences = [s for s in data if isinstance(s, Sentence)]
    if plan is not None and len(sentences) != len(data):
        raise ValueError("pretrain with a plan needs sentences with structures (read a CoNLL-U treebank), not raw text")
    tokenizer = train_wordpiece([s.words for s in sentences] if sentences else list(data), vocab_size=config.vocab_size)
    tokenizer.model_max_length = config.max_length
    torch.manual_seed(config.seed)
    model = BertForMaskedLM(BertConfig(
        vocab_size=len(tokenizer), hidden_size=config.width, num_hidden_layers=config.layers,
        num_attention_heads=config.heads or max(1, config.width // 64), intermediate_size=4 * config.width,
        max_position_embeddings=config.max_length, pad_token_id=tokenizer.pad_token_id,
    ))
    if plan is not None:
        attach(model, plan)
    batches = _Batches(tokenizer, list(data), plan, config)
    masker = DataCollatorForLanguageModeling(tokenizer, mlm_probability=config.mlm_probability)
    masker.generator = torch.Generator().manual_seed(config.seed)
    losses = _train(model, batches, masker, config, progress)
    model.eval()
    if out is not None:
        _save(model, tokenizer, Path(out), plan, config, losses, batches.skipped)
    return model, tokenizer, losses


class _Batches:
    """Random batches (seeded) of the tokenized data, with structures when a plan needs them."""

    def __init__(self, tokenizer: Any, data: list[Any], plan: str | None, config: PretrainConfig) -> None:
        self.tokenizer, self.config, self.rng = tokenizer, config, random.Random(config.seed)
        self.collator = None
        if plan is not None:
            names = {g.structure for groups in _plan_layers(plan, config) for g in groups if g.structure}
            self.collator = StructureCollator(tokenizer, providers={n: n for n in names})
            lengths = tokenizer([s.words for s in data], is_split_into_words=True, verbose=False)["input_ids"]
            keep = [s for s, ids in zip(data, lengths) if len(ids) <= config.max_length]
            self.skipped, data = len(data) - len(keep), keep
        else:
            self.skipped = 0
            data = [line for line in data if (line.words if isinstance(line, Sentence) else line).__len__()]
        if not data:
            raise ValueError("pretrain: no usable sentence (all empty or longer than max_length)")
        self.data = data

    def next(self) -> dict[str, Any]:
        chunk = [self.data[self.rng.randrange(len(self.data))] for _ in range(self.config.batch_size)]
        if self.collator is not None:
            return self.collator(chunk)
        words = isinstance(chunk[0], Sentence)
        return dict(self.tokenizer([s.words for s in chunk] if words else chunk, is_split_into_words=words,
                                   padding=True, truncation=True, max_length=self.config.max_length,
                                   return_tensors="pt"))


def _plan_layers(plan: str, config: PretrainConfig):
    from structattn.encoders.plan import parse_plan

    return parse_plan(plan, config.layers, config.heads or max(1, config.width // 64))


def _train(model: Any, batches: _Batches, masker: Any, config: PretrainConfig, progress: bool) -> list[float]:
    from transformers import get_linear_schedule_with_warmup

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr)
    schedule = get_linear_schedule_with_warmup(optimizer, min(config.warmup_steps, config.steps), max(config.steps, 1))
    special = torch.tensor(batches.tokenizer.all_special_ids)
    model.train()
    losses: list[float] = []
    bar = progress_bar(range(config.steps), quiet=not progress, desc="pretrain MLM")
    for _ in bar:
        batch = batches.next()
        no_mask = torch.isin(batch["input_ids"], special) | ~batch["attention_mask"].bool()
        batch["input_ids"], batch["labels"] = masker.torch_mask_tokens(batch["input_ids"].clone(), special_tokens_mask=no_mask)
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses


def _save(model: Any, tokenizer: Any, out: Path, plan: str | None, config: PretrainConfig, losses: list[float],
          skipped: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    record = {"plan": plan, "config": asdict(config), "losses": losses, "skipped_sentences": skipped}
    (out / "pretrain.json").write_text(json.dumps(record, indent=1))
