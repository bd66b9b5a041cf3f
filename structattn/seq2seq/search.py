"""Greedy and batched beam search over a :class:`~structattn.seq2seq.steppers.Stepper`.

Both return token ids without ``<s>`` and ``</s>``. A hypothesis of sentence ``i`` has at most
``max_lengths[i]`` tokens, ``</s>`` included: at that step only ``</s>`` is allowed.

Beam search (as in fairseq): every step scores the ``k * V`` one-token extensions of the ``k`` live
hypotheses of each sentence, takes the best ``2k``; those ending in ``</s>`` *among the best k* are finished
(scored with the length penalty), the best ``k`` others stay live. A sentence stops when it has ``k``
finished hypotheses or reaches its maximum length; the answer is its best finished hypothesis under
GNMT's length penalty (Wu et al., 2016, eq. 14 without the coverage term):
``score(y) = log p(y) / lp(|y|)`` with ``lp(L) = ((5 + L) / 6) ** alpha`` (``alpha = 0``: raw log-probability;
``|y|`` counts ``</s>``). With ``k = 1`` this is greedy search.
"""

from __future__ import annotations

from typing import Sequence

import torch

from structattn.seq2seq.steppers import Stepper


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's ``((5 + length) / 6) ** alpha``."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def greedy_search(stepper: Stepper, bos_id: int, eos_id: int, max_lengths: Sequence[int]) -> list[list[int]]:
    """The most probable next token at every step, until ``</s>`` or the length limit, for each sentence.
    Finished sentences leave the batch (``stepper.reorder``), so later steps cost less."""
    alive = torch.arange(len(max_lengths))  # the sentence of each row
    limits = torch.tensor(list(max_lengths))
    last = torch.full((len(max_lengths),), bos_id, dtype=torch.long)
    history = torch.full((len(max_lengths), int(limits.max())), eos_id, dtype=torch.long)  # (b, T); </s> unless written
    for t in range(int(limits.max())):
        token = stepper.step(last).argmax(-1).cpu()
        token = torch.where(t + 1 >= limits[alive], torch.full_like(token, eos_id), token)
        history[alive, t] = token
        going = token != eos_id
        if not bool(going.any()):
            break
        if not bool(going.all()):
            stepper.reorder(torch.nonzero(going).flatten().to(_device(stepper)))
            alive, token = alive[going], token[going]
        last = token.to(last.device)
    return _until_eos(history, eos_id)


@torch.no_grad()
def beam_search(stepper: Stepper, bos_id: int, eos_id: int, max_lengths: Sequence[int], beam: int,
                alpha: float = 0.6) -> list[list[int]]:
    """Batched beam search (see the module docstring); ``stepper`` holds ``beam`` rows per sentence.
    The first step runs on one row per sentence (the copies are alike before the first token); finished
    sentences leave the batch, so later steps cost less. Per step, only each hypothesis's best ``2k`` tokens
    leave the stepper's device and Python touches only the finished hypotheses.

    Returns:
        The best finished hypothesis of each sentence, in input order.
    """
    k = beam
    alive = torch.arange(len(max_lengths))  # the sentence of each group of rows
    limits = torch.tensor(list(max_lengths))
    scores = torch.zeros(len(alive), 1, dtype=torch.float64)  # (b, r): r live hypotheses per sentence, 1 at first
    tokens = torch.full((len(alive), 1), bos_id, dtype=torch.long)
    if k > 1:  # the k copies of a sentence are alike before the first token: step one of them
        stepper.reorder((torch.arange(len(alive)) * k).to(_device(stepper)))
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in max_lengths]
    done = torch.zeros(len(max_lengths), dtype=torch.long)  # finished hypotheses per sentence
    for t in range(int(limits.max())):
        b, r = scores.shape
        logp = stepper.step(tokens[:, -1])  # (b * r, V)
        top, parent, token = _best_extensions(logp, scores, t + 1 >= limits[alive], eos_id, k)  # (b, 2k) each
        is_eos = token == eos_id
        hits = is_eos[:, :k] & torch.isfinite(top[:, :k])  # (b, k): </s> among the best k
        done[alive] += hits.sum(1)
        if bool(hits.any()):
            _finish(finished, alive, top, parent, hits, tokens, r, t + 1, alpha)
        keep = (torch.arange(top.shape[1]) + is_eos * top.shape[1]).argsort(dim=1)[:, :k]  # best k non-</s>
        scores = top.gather(1, keep).masked_fill(is_eos.gather(1, keep), -torch.inf)
        rows = parent.gather(1, keep) + torch.arange(b)[:, None] * r  # (b, k): each survivor's parent row
        tokens = torch.cat([tokens[rows.flatten()], token.gather(1, keep).flatten()[:, None]], dim=1)
        going = (done[alive] < k) & (t + 1 < limits[alive])
        if not bool(going.any()):
            break
        alive, scores = alive[going], scores[going]
        tokens = tokens.view(b, k, -1)[going].flatten(0, 1)
        stepper.reorder(rows[going].flatten().to(_device(stepper)))
    return [max(f, key=lambda pair: pair[0])[1] for f in finished]


def _best_extensions(logp: torch.Tensor, scores: torch.Tensor, forced: torch.Tensor, eos_id: int,
                     k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best ``min(2k, k V)`` one-token extensions of each sentence's ``r`` hypotheses, best first.

    Equal to ``topk`` over all ``r * V`` candidates ``scores + logp`` (float64) of a sentence (only the choice
    among exactly equal candidates may differ), in two cheaper passes that never build that candidate tensor
    in float64: the maximum of every :data:`CHUNK` tokens of each row, plus the row's score, bounds the
    candidates of that chunk, so a sentence's best ``2k`` lie in its ``2k`` chunks with the highest bounds;
    only those chunks are then scored. Sentences at their length limit (``forced``) extend by ``</s>`` only.
    With fewer than ``2k`` live candidates (``r = 1``, tiny vocabulary), the rest are ``-inf`` (dead) ones.

    Shapes:
        logp: (b * r, V) on the stepper's device; scores: (b, r) float64; forced: (b,) bool. Returns the
        candidate scores (b, 2k) float64, their parent hypothesis (b, 2k) in ``0 .. r - 1`` and their tokens
        (b, 2k), on the CPU.
    """
    (b, r), vocab = scores.shape, logp.shape[-1]
    count = min(2 * k, k * vocab)
    full = vocab // CHUNK
    if r * full <= 4 * count:  # few chunks: score every candidate
        candidates = scores[..., None] + logp.view(b, r, vocab).cpu().double()  # (b, r, V)
        top, flat = candidates.view(b, -1).topk(min(count, r * vocab), dim=1)
    else:
        heads = logp[:, : full * CHUNK].view(b * r, full, CHUNK).amax(dim=-1)  # (b r, chunks): chunk maxima
        if vocab % CHUNK:
            heads = torch.cat([heads, logp[:, full * CHUNK:].amax(dim=-1, keepdim=True)], dim=1)
        chunks = heads.shape[1]
        bounds = scores.to(heads.device)[..., None] + heads.view(b, r, chunks).double()  # (b, r, chunks)
        best = bounds.view(b, -1).topk(count, dim=1)[1]  # (b, 2k): row * chunks + chunk
        row, chunk = best // chunks, best % chunks
        column = (chunk[..., None] * CHUNK + torch.arange(CHUNK, device=logp.device)).flatten(1)  # (b, 2k CHUNK)
        parent = row.repeat_interleave(CHUNK, dim=1)
        outside = column >= vocab  # the last, partial chunk's missing columns
        rows = parent + torch.arange(b, device=logp.device)[:, None] * r
        values = logp[rows, column.clamp(max=vocab - 1)].cpu().double()
        candidates = (scores.gather(1, parent.cpu()) + values).masked_fill(outside.cpu(), -torch.inf)
        top, position = candidates.topk(count, dim=1)
        flat = parent.cpu().gather(1, position) * vocab + column.cpu().gather(1, position)
    if top.shape[1] < count:
        top = torch.cat([top, top.new_full((b, count - top.shape[1]), -torch.inf)], dim=1)
        flat = torch.cat([flat, flat.new_zeros(b, count - flat.shape[1])], dim=1)
    parent, token = flat // vocab, flat % vocab
    if bool(forced.any()):  # only </s>: each hypothesis's one extension, best first, then dead ones
        eos = scores[forced] + logp.view(b, r, vocab)[forced.to(logp.device), :, eos_id].cpu().double()  # (f, r)
        order = eos.argsort(dim=1, descending=True, stable=True)
        dead = top.new_full((eos.shape[0], count - r), -torch.inf)
        top[forced] = torch.cat([eos.gather(1, order), dead], dim=1)
        parent[forced] = torch.cat([order, order.new_zeros(eos.shape[0], count - r)], dim=1)
        token[forced] = eos_id
    return top, parent, token


#: Tokens per chunk of :func:`_best_extensions`'s first pass.
CHUNK = 64


def _finish(finished: list[list[tuple[float, list[int]]]], alive: torch.Tensor, top: torch.Tensor, parent: torch.Tensor,
            hits: torch.Tensor, tokens: torch.Tensor, r: int, length: int, alpha: float) -> None:
    """Move the ``</s>`` candidates ranked among the best ``k`` with a finite score (``hits``) into ``finished``;
    ``tokens`` holds ``r`` hypotheses per sentence."""
    penalty = length_penalty(length, alpha)
    for s, rank in torch.nonzero(hits).tolist():
        prefix = tokens[s * r + int(parent[s, rank]), 1:].tolist()
        finished[int(alive[s])].append((float(top[s, rank]) / penalty, prefix))


def _until_eos(history: torch.Tensor, eos_id: int) -> list[list[int]]:
    """Each row of ``history`` (b, T) up to its first ``</s>``."""
    lengths = (history != eos_id).cumprod(dim=1).sum(dim=1).tolist()
    return [row[:n] for row, n in zip(history.tolist(), lengths)]


def _device(stepper: Stepper) -> torch.device:
    memory = getattr(stepper, "memory", None)
    return memory.device if isinstance(memory, torch.Tensor) else torch.device("cpu")
