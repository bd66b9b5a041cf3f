"""Decoding: the cache equals recomputation, beam 1 equals greedy, beam search finds the enumerated optimum,
results come back in input order."""

import itertools

import pytest
import torch

from structattn.seq2seq import (CachedStepper, RecomputeStepper, Seq2SeqOptions, beam_search, greedy_search,
                                length_penalty, source_batch, translate_examples)
from tests.seq2seq.helpers import BOS, EOS, random_pairs, tiny_model


def test_cached_logits_equal_recomputation_at_every_step():
    model = tiny_model()
    source = source_batch(random_pairs(2))
    cached, recompute = CachedStepper(model, source), RecomputeStepper(model, source)
    g = torch.Generator().manual_seed(1)
    last = torch.full((2,), BOS)
    for _ in range(9):
        a, b = cached.step(last), recompute.step(last)
        assert a.dtype == torch.float64
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
        last = torch.randint(4, 13, (2,), generator=g)


def test_cached_stepper_reorder_matches_recomputation():
    model = tiny_model()
    source = source_batch(random_pairs(2))
    cached, recompute = CachedStepper(model, source, copies=3), RecomputeStepper(model, source, copies=3)
    last = torch.full((6,), BOS)
    for step in range(5):
        torch.testing.assert_close(cached.step(last), recompute.step(last), rtol=0, atol=1e-10)
        index = torch.tensor([2, 2, 0, 5, 3, 3]) if step % 2 else torch.tensor([1, 0, 2, 4, 4, 5])
        cached.reorder(index)
        recompute.reorder(index)
        last = torch.tensor([4, 5, 6, 7, 8, 9]) + step % 3


def test_beam_one_equals_greedy():
    model = tiny_model(seed=3)
    pairs = random_pairs(4)
    limits = [len(p) + 6 for p in pairs]
    source = source_batch(pairs)
    greedy = greedy_search(CachedStepper(model, source), BOS, EOS, limits)
    beam = beam_search(CachedStepper(model, source, copies=1), BOS, EOS, limits, beam=1)
    assert greedy == beam
    assert any(len(h) > 0 for h in greedy)


class TableStepper:
    """A hand-made model: log p(next | prefix) from a fixed random table indexed by the prefix."""

    def __init__(self, rows: int, vocab: int, seed: int) -> None:
        self.vocab, self.seed = vocab, seed
        self.table: dict[tuple[int, ...], torch.Tensor] = {}
        self.prefix = [[] for _ in range(rows)]

    def logp(self, prefix: tuple[int, ...]) -> torch.Tensor:
        if prefix not in self.table:  # the same prefix gets the same numbers, whatever the order of calls
            g = torch.Generator().manual_seed(hash((self.seed, *prefix)) % 2**31)
            scores = torch.randn(self.vocab, generator=g, dtype=torch.float64) * 2
            scores[:2] = -torch.inf  # padding and unknown never predicted; BOS (2) is just another token here
            self.table[prefix] = torch.log_softmax(scores, dim=0)
        return self.table[prefix]

    def step(self, last: torch.Tensor) -> torch.Tensor:
        self.prefix = [p + [int(t)] for p, t in zip(self.prefix, last)]
        return torch.stack([self.logp(tuple(p[1:])) for p in self.prefix])

    def reorder(self, index: torch.Tensor) -> None:
        self.prefix = [list(self.prefix[int(i)]) for i in index]


def brute_force(stepper: TableStepper, max_length: int, alpha: float) -> list[int]:
    """Every hypothesis of at most ``max_length`` tokens (</s> included) scored exhaustively."""
    real = [t for t in range(2, stepper.vocab) if t != EOS]
    best, best_score = None, -float("inf")
    for length in range(max_length):
        for body in itertools.product(real, repeat=length):
            full = list(body) + [EOS]
            score = sum(float(stepper.logp(tuple(full[:i]))[full[i]]) for i in range(len(full)))
            score /= length_penalty(len(full), alpha)
            if score > best_score:
                best, best_score = list(body), score
    return best


def test_beam_search_finds_the_enumerated_best():
    for seed, alpha in [(0, 0.0), (1, 0.6), (2, 1.0), (5, 2.0)]:
        stepper = TableStepper(rows=16, vocab=6, seed=seed)  # 3 real tokens + </s>; 13 hypotheses <= beam 16
        found = beam_search(stepper, BOS, EOS, [3], beam=16, alpha=alpha)
        assert found == [brute_force(stepper, 3, alpha)], (seed, alpha)


def test_batched_beam_with_sentences_finishing_at_different_steps_equals_one_by_one():
    limits, beam = [4, 2, 5, 3], 3
    together = beam_search(TableStepper(rows=len(limits) * beam, vocab=7, seed=9), BOS, EOS, limits, beam=beam)
    alone = [beam_search(TableStepper(rows=beam, vocab=7, seed=9), BOS, EOS, [n], beam=beam)[0] for n in limits]
    assert together == alone
    assert len({tuple(h) for h in together}) > 1
    greedy = greedy_search(TableStepper(rows=len(limits), vocab=7, seed=9), BOS, EOS, limits)
    assert greedy == [greedy_search(TableStepper(rows=1, vocab=7, seed=9), BOS, EOS, [n])[0] for n in limits]


def test_translate_returns_input_order_and_matches_unbatched():
    model = tiny_model(seed=4)
    pairs = random_pairs(5)
    options = Seq2SeqOptions(beam=3, max_len_a=1.0, max_len_b=4)
    together = translate_examples(model, pairs, options, batch_size=2)
    alone = [translate_examples(model, [p], options)[0] for p in pairs]
    assert together == alone
    recomputed = translate_examples(model, pairs, options, batch_size=2, cached=False)
    assert recomputed == together


def reference_beam(model, pair, max_length: int, beam: int, alpha: float) -> list[int]:
    """Fairseq-style beam search for one sentence, written plainly: Python lists, the decoder rerun over every
    whole prefix, every (hypothesis, token) extension scored and sorted."""
    memory, memory_mask = model.encode(source_batch([pair]))
    live = [(0.0, [])]  # (log-probability, tokens after <s>)
    finished = []
    for length in range(1, max_length + 1):
        prefixes = torch.tensor([[BOS] + tokens for _, tokens in live])
        logits = model.decoder(prefixes, memory.expand(len(live), -1, -1), memory_mask.expand(len(live), -1))
        logp = torch.log_softmax(logits[:, -1], dim=-1).tolist()
        allowed = [EOS] if length == max_length else range(len(logp[0]))
        candidates = sorted(((score + logp[h][w], h, w) for h, (score, _) in enumerate(live) for w in allowed),
                            key=lambda c: -c[0])[: 2 * beam]
        finished += [(score / length_penalty(length, alpha), live[h][1])
                     for rank, (score, h, w) in enumerate(candidates) if w == EOS and rank < beam]
        live = [(score, live[h][1] + [w]) for score, h, w in candidates if w != EOS][:beam]
        if len(finished) >= beam or not live:
            break
    return max(finished, key=lambda pair: pair[0])[1]


def sharp_model():
    """A tiny model whose decoder weights are scaled up: peaked, source-dependent distributions, so that beam
    size and length penalty change the answers (the plain tiny model repeats one token)."""
    model = tiny_model(seed=7, tie=False)
    with torch.no_grad():
        for weight in model.decoder.parameters():
            if weight.dim() == 2:
                weight.mul_(3.0)
    return model


def test_beam_search_equals_a_plain_reference_on_a_padded_batch():
    model = sharp_model()
    pairs = random_pairs(5, seed=2)  # distinct source lengths: the batch is padded
    limits = [2 + (3 * k) % 7 for k in range(len(pairs))]
    source = source_batch(pairs)
    source.input_ids[~source.token_mask] = 7  # garbage ids on padding
    seen = set()
    for beam, alpha in [(2, 0.0), (3, 0.6), (5, 1.0), (8, 0.6)]:  # beam 8: 2 * beam > 13 target tokens
        found = beam_search(CachedStepper(model, source, copies=beam), BOS, EOS, limits, beam=beam, alpha=alpha)
        expected = [reference_beam(model, p, n, beam, alpha) for p, n in zip(pairs, limits)]
        assert found == expected, (beam, alpha)
        seen.add(tuple(map(tuple, found)))
    assert len(seen) == 4 and len({len(h) for answers in seen for h in answers}) > 3


def test_cached_stepper_follows_any_reorder_layout():
    """Equal groups per sentence (memory kept once per sentence), one row per sentence, uneven groups and rows
    mixing sentences (memory per row): every step equals recomputation."""
    model = tiny_model()
    source = source_batch(random_pairs(3))
    cached, recompute = CachedStepper(model, source, copies=2), RecomputeStepper(model, source, copies=2)
    # rows after each reorder, by sentence: [0 1 2], [0 0 1 1 2 2], [0 0 2 2], [0 2 2 2], [2 0 2 2 2], [2 2]
    layouts = [[0, 2, 4], [0, 0, 1, 1, 2, 2], [1, 0, 5, 4], [0, 2, 2, 3], [3, 0, 1, 1, 2], [4, 0]]
    memory_rows = [3, 3, 2, 4, 5, 2]  # once per sentence while the groups are equal, then once per row
    last = torch.full((6,), BOS)
    for step, (index, rows) in enumerate(zip(layouts, memory_rows)):
        torch.testing.assert_close(cached.step(last), recompute.step(last), rtol=0, atol=1e-10)
        cached.reorder(torch.tensor(index))
        recompute.reorder(torch.tensor(index))
        assert cached.memory.shape[0] == rows, step
        last = torch.arange(len(index)) % 9 + 4 + step % 2
    torch.testing.assert_close(cached.step(last), recompute.step(last), rtol=0, atol=1e-10)


def test_best_extensions_equal_topk_over_every_candidate():
    """The chunked two-pass search equals a plain ``topk`` over all ``r * V`` candidates ``score + logp`` of each
    sentence: vocabularies below, at and above the chunked path, a partial last chunk holding the best tokens,
    dead hypotheses (``-inf``), one hypothesis (the first step) and sentences at their length limit."""
    from structattn.seq2seq.search import _best_extensions

    g = torch.Generator().manual_seed(0)
    for vocab in (7, 640, 1000, 1029, 8000):
        for b, r, k in ((3, 1, 5), (4, 5, 5), (2, 3, 4)):
            logp = torch.log_softmax(3 * torch.randn(b * r, vocab, generator=g), dim=-1)
            logp[1, -3:] = 9.0 + torch.arange(3.0)  # the best values in the partial last chunk
            scores = -10 * torch.rand(b, r, generator=g, dtype=torch.float64)
            if r > 1:
                scores[0, -1] = -torch.inf  # a dead hypothesis
            forced = torch.zeros(b, dtype=torch.bool)
            forced[-1] = True
            top, parent, token = _best_extensions(logp, scores, forced, EOS, k)
            count = min(2 * k, k * vocab)
            candidates = (scores[..., None] + logp.view(b, r, vocab).double()).view(b, -1)
            want_top, want_flat = candidates.topk(min(count, r * vocab), dim=1)
            for s in range(b - 1):  # free sentences: the overall best candidates
                assert torch.equal(top[s, : want_top.shape[1]], want_top[s]), (vocab, b, r, k, s)
                assert torch.equal(parent[s, : want_top.shape[1]] * vocab + token[s, : want_top.shape[1]], want_flat[s])
                assert bool(torch.isinf(top[s, want_top.shape[1]:]).all())
            eos = (scores[-1] + logp.view(b, r, vocab)[-1, :, EOS].double()).sort(descending=True)
            assert torch.equal(top[-1, :r], eos.values) and torch.equal(parent[-1, :r], eos.indices)
            assert bool((token[-1] == EOS).all()) and bool(torch.isinf(top[-1, r:]).all())



def test_bf16_decoding_runs_the_model_in_bfloat16_and_fp32_stays_the_default():
    model = tiny_model(seed=4).float()  # autocast leaves float64 alone
    pairs = random_pairs(5)
    options = Seq2SeqOptions(beam=3, max_len_a=1.0, max_len_b=4)
    seen: list[torch.dtype] = []
    hook = model.decoder.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    try:
        fp32 = translate_examples(model, pairs, options, batch_size=2)
        assert set(seen) == {torch.float32}
        seen.clear()
        for beam in (1, 3):
            bf16 = translate_examples(model, pairs, options, batch_size=2, beam=beam, precision="bf16")
            assert set(seen) == {torch.bfloat16}
            assert len(bf16) == len(pairs) and all(isinstance(t, int) and t >= 0 for h in bf16 for t in h)
            seen.clear()
    finally:
        hook.remove()
    assert translate_examples(model, pairs, options, batch_size=2, precision="fp32") == fp32
    with pytest.raises(ValueError, match="precision must be 'fp32' or 'bf16', got 'fp16'"):
        translate_examples(model, pairs, options, precision="fp16")
