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
    out: list[list[int]] = [[] for _ in max_lengths]
    for t in range(int(limits.max())):
        token = stepper.step(last).argmax(-1).cpu()
        token = torch.where(t + 1 >= limits[alive], torch.full_like(token, eos_id), token)
        going = token != eos_id
        for row in torch.nonzero(going).flatten().tolist():
            out[int(alive[row])].append(int(token[row]))
        if not bool(going.any()):
            break
        if not bool(going.all()):
            stepper.reorder(torch.nonzero(going).flatten().to(_device(stepper)))
            alive, token = alive[going], token[going]
        last = token.to(last.device)
    return out


@torch.no_grad()
def beam_search(stepper: Stepper, bos_id: int, eos_id: int, max_lengths: Sequence[int], beam: int,
                alpha: float = 0.6) -> list[list[int]]:
    """Batched beam search (see the module docstring); ``stepper`` holds ``beam`` rows per sentence.
    Finished sentences leave the batch, so later steps cost less.

    Returns:
        The best finished hypothesis of each sentence, in input order.
    """
    k = beam
    alive = torch.arange(len(max_lengths))  # the sentence of each group of k rows
    limits = torch.tensor(list(max_lengths))
    scores = torch.full((len(alive), k), -torch.inf, dtype=torch.float64)
    scores[:, 0] = 0.0  # one live hypothesis to start with
    tokens = torch.full((len(alive) * k, 1), bos_id, dtype=torch.long)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in max_lengths]
    for t in range(int(limits.max())):
        b = len(alive)
        logp = stepper.step(tokens[:, -1]).cpu().double().view(b, k, -1)  # (b, k, V)
        vocab = logp.shape[-1]
        forced = (t + 1 >= limits[alive])[:, None, None]  # (b, 1, 1): only </s> may follow
        only_eos = torch.full_like(logp, -torch.inf)
        only_eos[..., eos_id] = logp[..., eos_id]
        candidates = scores[..., None] + torch.where(forced, only_eos, logp)
        top, index = candidates.view(b, -1).topk(min(2 * k, k * vocab), dim=1)  # (b, 2k)
        parent, token = index // vocab, index % vocab
        is_eos = token == eos_id
        _finish(finished, alive, top, parent, is_eos, tokens, k, t + 1, alpha)
        keep = (torch.arange(top.shape[1]) + is_eos * top.shape[1]).argsort(dim=1)[:, :k]  # best k non-</s>
        scores = top.gather(1, keep).masked_fill(is_eos.gather(1, keep), -torch.inf)
        rows = parent.gather(1, keep) + torch.arange(b)[:, None] * k  # (b, k): each survivor's parent row
        tokens = torch.cat([tokens[rows.flatten()], token.gather(1, keep).flatten()[:, None]], dim=1)
        going = torch.tensor([len(finished[int(i)]) < k for i in alive]) & (t + 1 < limits[alive])
        if not bool(going.any()):
            break
        alive, scores = alive[going], scores[going]
        tokens = tokens.view(b, k, -1)[going].flatten(0, 1)
        stepper.reorder(rows[going].flatten().to(_device(stepper)))
    return [max(f, key=lambda pair: pair[0])[1] for f in finished]


def _finish(finished: list[list[tuple[float, list[int]]]], alive: torch.Tensor, top: torch.Tensor, parent: torch.Tensor,
            is_eos: torch.Tensor, tokens: torch.Tensor, k: int, length: int, alpha: float) -> None:
    """Move the ``</s>`` candidates ranked among the best ``k`` (with a finite score) into ``finished``."""
    penalty = length_penalty(length, alpha)
    hits = is_eos[:, :k] & torch.isfinite(top[:, :k])
    for s, r in torch.nonzero(hits).tolist():
        prefix = tokens[s * k + int(parent[s, r]), 1:].tolist()
        finished[int(alive[s])].append((float(top[s, r]) / penalty, prefix))


def _device(stepper: Stepper) -> torch.device:
    memory = getattr(stepper, "memory", None)
    return memory.device if isinstance(memory, torch.Tensor) else torch.device("cpu")
