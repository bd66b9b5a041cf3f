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
        top, index, token = _best_extensions(logp, scores, t + 1 >= limits[alive], eos_id, k)  # (b, 2k) each
        parent = index // _width(logp, k)
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


def _width(logp: torch.Tensor, k: int) -> int:
    """Extensions kept per hypothesis: the best ``2k`` of each are enough to hold the best ``2k`` of a sentence."""
    return min(2 * k, logp.shape[-1])


def _best_extensions(logp: torch.Tensor, scores: torch.Tensor, forced: torch.Tensor, eos_id: int,
                     k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best ``min(2k, k V)`` one-token extensions of each sentence's ``r`` hypotheses, best first.

    Equal to ``topk`` over all ``r * V`` candidates ``scores + logp`` (float64), but the full candidate tensor is
    never built: each hypothesis contributes only its own best ``2k`` tokens (adding its score keeps their order).
    With fewer than ``min(2k, k V)`` candidates (``r = 1``, tiny vocabulary), the rest are ``-inf`` (dead) ones.

    Shapes:
        logp: (b * r, V) on the stepper's device; scores: (b, r) float64; forced: (b,) bool, only ``</s>`` may
        follow. Returns the candidate scores (b, 2k) float64, their flat index ``parent * width + rank`` and
        their tokens (b, 2k) long, on the CPU.
    """
    (b, r), vocab, width = scores.shape, logp.shape[-1], _width(logp, k)
    best, best_token = _row_topk(logp, width)  # (b * r, width)
    best, best_token = best.cpu().double(), best_token.cpu()
    if bool(forced.any()):
        rows = forced.repeat_interleave(r)
        best[rows] = -torch.inf
        best[rows, 0] = logp[rows.to(logp.device), eos_id].cpu().double()
        best_token[rows, 0] = eos_id
    candidates = (scores[..., None] + best.view(b, r, width)).view(b, -1)  # (b, r * width)
    count = min(2 * k, k * vocab)
    top, index = candidates.topk(min(count, r * width), dim=1)
    if top.shape[1] < count:
        top = torch.cat([top, top.new_full((b, count - top.shape[1]), -torch.inf)], dim=1)
        index = torch.cat([index, index.new_zeros(b, count - index.shape[1])], dim=1)
    return top, index, best_token.view(b, -1).gather(1, index)


def _row_topk(x: torch.Tensor, k: int, chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """``x.topk(k, dim=-1)`` for wide rows (B, V), in two cheaper passes: each row's ``k`` best values lie in the
    ``k`` chunks of ``chunk`` columns with the highest maxima (only the choice among exactly equal values may
    differ from ``topk``'s)."""
    rows, width = x.shape
    full = width // chunk
    if full <= 4 * k:
        return x.topk(k, dim=-1)
    heads = x[:, : full * chunk].view(rows, full, chunk).amax(dim=-1)  # (B, full)
    if width % chunk:
        heads = torch.cat([heads, x[:, full * chunk:].amax(dim=-1, keepdim=True)], dim=1)
    columns = (heads.topk(k, dim=-1)[1][..., None] * chunk + torch.arange(chunk, device=x.device)).flatten(1)
    outside = columns >= width  # the last, partial chunk's missing columns
    values = x.gather(1, columns.clamp(max=width - 1)).masked_fill(outside, -torch.inf)  # (B, k * chunk)
    top, position = values.topk(k, dim=-1)
    return top, columns.gather(1, position)


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
