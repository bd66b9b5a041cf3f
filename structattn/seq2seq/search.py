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
    """The most probable next token at every step, until ``</s>`` or the length limit, for each sentence."""
    b = len(max_lengths)
    limits = torch.tensor(list(max_lengths))
    last = torch.full((b,), bos_id, dtype=torch.long)
    done = torch.zeros(b, dtype=torch.bool)
    out: list[list[int]] = [[] for _ in range(b)]
    for t in range(int(limits.max())):
        token = stepper.step(last).argmax(-1).cpu()
        token = torch.where(t + 1 >= limits, torch.full_like(token, eos_id), token)
        for i in torch.nonzero(~done & (token != eos_id)).flatten().tolist():
            out[i].append(int(token[i]))
        done |= token == eos_id
        if bool(done.all()):
            break
        last = token.to(last.device)
    return out


@torch.no_grad()
def beam_search(stepper: Stepper, bos_id: int, eos_id: int, max_lengths: Sequence[int], beam: int,
                alpha: float = 0.6) -> list[list[int]]:
    """Batched beam search (see the module docstring); ``stepper`` holds ``beam`` rows per sentence.

    Returns:
        The best finished hypothesis of each sentence, in input order.
    """
    b, k = len(max_lengths), beam
    limits = torch.tensor(list(max_lengths))
    scores = torch.full((b, k), -torch.inf, dtype=torch.float64)
    scores[:, 0] = 0.0  # one live hypothesis to start with
    tokens = torch.full((b * k, 1), bos_id, dtype=torch.long)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    done = [False] * b
    for t in range(int(limits.max())):
        logp = stepper.step(tokens[:, -1]).cpu().double()  # (b * k, V)
        vocab = logp.shape[-1]
        forced = (t + 1 >= limits)[:, None, None]  # (b, 1, 1)
        only_eos = torch.full_like(logp.view(b, k, vocab), -torch.inf)
        only_eos[..., eos_id] = 0.0
        candidates = scores[..., None] + torch.where(forced, only_eos + logp.view(b, k, vocab)[..., eos_id : eos_id + 1],
                                                      logp.view(b, k, vocab))
        top, index = candidates.view(b, -1).topk(min(2 * k, k * vocab), dim=1)  # (b, 2k)
        parent, token = index // vocab, index % vocab
        is_eos = token == eos_id
        _finish(finished, done, top, parent, token, is_eos, tokens, k, t + 1, alpha)
        keep = (torch.arange(top.shape[1]) + is_eos * top.shape[1]).argsort(dim=1)[:, :k]  # best k non-EOS
        scores = top.gather(1, keep).masked_fill(is_eos.gather(1, keep), -torch.inf)
        rows = (parent.gather(1, keep) + torch.arange(b)[:, None] * k).flatten()  # (b * k,)
        tokens = torch.cat([tokens[rows], token.gather(1, keep).flatten()[:, None]], dim=1)
        for i in range(b):
            done[i] = done[i] or len(finished[i]) >= k or bool(t + 1 >= limits[i])
        if all(done):
            break
        stepper.reorder(rows.to(_device(stepper)))
    return [max(f, key=lambda pair: pair[0])[1] for f in finished]


def _finish(finished: list[list[tuple[float, list[int]]]], done: list[bool], top: torch.Tensor, parent: torch.Tensor,
            token: torch.Tensor, is_eos: torch.Tensor, tokens: torch.Tensor, k: int, length: int, alpha: float) -> None:
    """Move the ``</s>`` candidates ranked among the best ``k`` (with a finite score) into ``finished``."""
    penalty = length_penalty(length, alpha)
    hits = is_eos[:, :k] & torch.isfinite(top[:, :k])
    for i, r in torch.nonzero(hits).tolist():
        if not done[i]:
            prefix = tokens[i * k + int(parent[i, r]), 1:].tolist()
            finished[i].append((float(top[i, r]) / penalty, prefix))


def _device(stepper: Stepper) -> torch.device:
    memory = getattr(stepper, "memory", None)
    return memory.device if isinstance(memory, torch.Tensor) else torch.device("cpu")
