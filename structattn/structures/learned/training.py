"""Training the learned distance predictor on trees (gold or parser output), with the structural-probe loss."""

from __future__ import annotations

import copy
from typing import Sequence

import torch

from structattn.command_line import busy_aware_threads
from structattn.progress import progress_bar
from structattn.structures.learned.decode import mst_heads, tree_uuas
from structattn.structures.learned.predictor import DistancePredictor, PredictorConfig
from structattn.structures.learned.words import WordFeatures
from structattn.structures.providers.dependency import DependencyProvider
from structattn.structures.sentence import Sentence
from structattn.structures.trees import probe_loss


def predicted_heads(model: DistancePredictor, sentences: Sequence[Sentence], batch_size: int = 64) -> list[list[int]]:
    """MST-decoded heads of every sentence (words only are read)."""
    out: list[list[int]] = []
    for start in range(0, len(sentences), batch_size):
        chunk = [list(s.words) for s in sentences[start:start + batch_size]]
        out.extend(mst_heads(d.double().numpy()) for d in model.predict(chunk))
    return out


def evaluate_uuas(model: DistancePredictor, sentences: Sequence[Sentence]) -> float:
    """UUAS of the decoded trees against the sentences' heads (all words, punctuation included)."""
    return tree_uuas(predicted_heads(model, sentences), [s.heads for s in sentences])


def train_predictor(
    sentences: Sequence[Sentence],
    config: PredictorConfig = PredictorConfig(),
    epochs: int = 30,
    lr: float = 2e-3,
    batch_size: int = 32,
    min_freq: int = 2,
    seed: int = 0,
    dev: Sequence[Sentence] | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> tuple[DistancePredictor, list[dict[str, float]]]:
    """Train a :class:`DistancePredictor` on the trees of ``sentences`` (their ``heads``).

    Deterministic given ``seed`` (initialisation, dropout and minibatch order come from it; the global
    torch RNG is restored afterwards). With ``dev`` sentences the weights of the epoch with the best dev
    UUAS are kept (early stopping by selection); else those of the last epoch. ``threads``: torch's intra-op
    threads while training (``None``: the current count capped at the cores not busy, so a busy machine is not
    oversubscribed; the caller's count is restored afterwards).

    Returns:
        the trained model in eval mode, and per epoch ``{"epoch", "loss"}`` (plus ``"dev_uuas"``).

    Raises:
        ValueError: no sentences, or a sentence without heads (named by id).
    """
    if not sentences:
        raise ValueError("train_predictor: no training sentences")
    for s in list(sentences) + list(dev or []):
        if s.heads is None:
            raise ValueError(f"train_predictor: sentence {s.id!r} has no heads (a tree is needed to learn from)")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"train_predictor: epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    with torch.random.fork_rng(devices=[]), busy_aware_threads(threads):
        torch.manual_seed(seed)
        return _train(list(sentences), config, epochs, lr, batch_size, min_freq, seed, dev, progress)


def _train(sentences, config, epochs, lr, batch_size, min_freq, seed, dev, progress):
    model = DistancePredictor(WordFeatures.build((s.words for s in sentences), min_freq), config)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    order = torch.Generator().manual_seed(seed)
    provider = DependencyProvider()
    history, best = [], (-1.0, None)
    for epoch in progress_bar(range(epochs), quiet=not progress, desc="train distance predictor", leave=False):
        model.train()
        total = 0.0
        for chunk in torch.randperm(len(sentences), generator=order).split(batch_size):
            batch = [sentences[int(k)] for k in chunk]
            ids, token_mask = model.features.encode([s.words for s in batch])
            loss = probe_loss(model(ids, token_mask), provider.batch(batch).distance, token_mask)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        record = {"epoch": epoch + 1, "loss": total / len(sentences)}
        if dev:
            record["dev_uuas"] = evaluate_uuas(model, dev)
            if record["dev_uuas"] > best[0]:
                best = (record["dev_uuas"], copy.deepcopy(model.state_dict()))
        history.append(record)
    if best[1] is not None:
        model.load_state_dict(best[1])
    return model.eval(), history
