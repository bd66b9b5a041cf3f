"""``ssan``: selective self-attention against its float64 oracle, with the Gumbel noise replayed."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from structattn.attention import get_attention
from structattn.structures import Structure
from tests.attention.cases import dependency_structure, random_qkv
from tests.reference.soft_bias import reference_bucket
from tests.reference.ssan import replay_noise, ssan_reference

B, H, N, D, DM = 2, 3, 7, 5, 11
LENGTHS = [7, 5]


def build(**options):
    return get_attention("ssan", num_heads=H, head_dim=D, d_model=DM, generator=options.pop("generator", 7), **options).double()


def inputs(seed: int = 0, lengths=LENGTHS, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    structure = dependency_structure(lengths, g)
    q, k, v = random_qkv(B, H, max(lengths), D, g)
    hidden = (scale * torch.randn(B, max(lengths), DM, generator=g, dtype=torch.float64)).requires_grad_()
    return structure, q, k, v, hidden


def energy(module, hidden):
    """The policy scores ``E = (H W_Q')(H W_K')^T`` per head, computed here from the weights: (b, h, n, n)."""
    b, n, _ = hidden.shape
    pq, pk = (
        (hidden @ proj.weight.T + (0 if proj.bias is None else proj.bias)).reshape(b, n, H, D).transpose(1, 2)
        for proj in (module.policy_query, module.policy_key)
    )
    return pq @ pk.transpose(-1, -2)


def real_pairs(structure):
    mask = structure.token_mask
    return (mask[:, :, None] & mask[:, None, :])[:, None].expand(B, H, -1, -1)


def compare_with_reference(module, structure, q, k, v, hidden, bias_fn=None):
    out, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    ref_out, ref_weights = ssan_reference(module, q, k, v, structure.token_mask, hidden, bias_fn)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)
    probe = torch.randn_like(out)
    leaves = [q, k, v, hidden, *module.parameters()]
    got = torch.autograd.grad((out * probe).sum(), leaves)
    want = torch.autograd.grad((ref_out * probe).sum(), leaves)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    return weights, got


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("threshold,temperature", [(0.5, 0.5), (0.3, 1.7)])
def test_train_mode_matches_reference_with_replayed_noise(soft, threshold, temperature):
    module = build(soft=soft, threshold=threshold, temperature=temperature).train()
    weights, grads = compare_with_reference(module, *inputs())
    policy_grads = grads[4:]
    assert all(g.abs().sum() > 0 for g in policy_grads), "the policy must receive a gradient"


@pytest.mark.parametrize("temperature", [0.5, 1.7])
def test_noise_has_the_law_of_a_difference_of_two_gumbels(temperature):
    """The module draws ``G' - G''`` as one logistic variate; compare that draw (times tau) with explicit
    differences of independent Gumbel(0, 1) pairs (two-sample Kolmogorov-Smirnov), and check the test has the
    power to reject a look-alike (a single Gumbel, centred)."""
    module = build(temperature=temperature, generator=3)
    noise, _ = module._noise((200_000,), torch.float64, torch.device("cpu"))
    drawn = (noise * temperature).numpy()
    gumbel = torch.distributions.Gumbel(torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    torch.manual_seed(5)
    pairs = (gumbel.sample((200_000,)) - gumbel.sample((200_000,))).numpy()
    assert stats.ks_2samp(drawn, pairs).pvalue > 1e-3
    assert abs(drawn.mean()) < 0.02 and drawn.var() == pytest.approx(math.pi**2 / 3, rel=0.02)
    centred_single = (gumbel.sample((200_000,)) - 0.5772156649).numpy()
    assert stats.ks_2samp(drawn, centred_single).pvalue < 1e-6


def test_eval_is_deterministic_and_thresholds_sigmoid_of_e():
    module = build().eval()
    structure, q, k, v, hidden = inputs(1)
    first = module(q, k, v, structure, hidden=hidden)
    second, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    assert torch.equal(first, second)
    compare_with_reference(module, structure, q, k, v, hidden)
    selected = (torch.sigmoid(energy(module, hidden)) > 0.5) & real_pairs(structure)
    nonempty = selected.any(-1, keepdim=True)
    assert torch.equal(weights > 0, selected & nonempty)


def test_straight_through_forward_is_hard_and_policy_gets_gradients():
    module = build().train()
    structure, q, k, v, hidden = inputs(2)
    state = module.generator.get_state()
    out, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    noise = replay_noise(module, (B, H, N, N), torch.float64)
    selected = (torch.sigmoid((energy(module, hidden) + noise) / module.temperature) > 0.5) & real_pairs(structure)
    # forward: an exact 0/1 selection, i.e. a plain softmax over the selected keys
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    expected = torch.softmax(scores.masked_fill(~selected, -math.inf), -1).nan_to_num(0.0)
    torch.testing.assert_close(weights, expected)
    assert torch.equal(weights > 0, selected & selected.any(-1, keepdim=True))
    # the forward is piecewise constant in the policy, yet the policy gets a gradient (straight-through)
    grads = torch.autograd.grad(out.square().sum(), [module.policy_query.weight, module.policy_key.weight])
    assert all(g.abs().sum() > 0 for g in grads)
    with torch.no_grad():
        module.policy_query.weight.mul_(1 + 1e-9)
    module.generator.set_state(state)
    assert torch.equal(module(q, k, v, structure, hidden=hidden), out)


def run_with_state(module, state, *args):
    module.generator.set_state(state)
    out, weights = module(*args[:4], hidden=args[4], return_weights=True)
    return out, weights


def test_temperature_effect():
    structure, q, k, v, hidden = inputs(3)
    args = (q, k, v, structure, hidden)
    state = torch.Generator().manual_seed(11).get_state()
    hard = {tau: build(temperature=tau).train() for tau in (0.1, 0.5, 2.0)}
    for m in hard.values():
        m.load_state_dict(hard[0.5].state_dict())
    # threshold 0.5: the selection is sign(E + G' - G''), independent of tau; the gradient scales with 1 / tau
    outs = {tau: run_with_state(m, state, *args)[0] for tau, m in hard.items()}
    assert torch.equal(outs[0.1], outs[0.5]) and torch.equal(outs[0.5], outs[2.0])
    grad = {tau: torch.autograd.grad(outs[tau].square().sum(), m.policy_key.weight)[0].norm() for tau, m in hard.items()}
    assert grad[0.1] != grad[0.5] != grad[2.0]
    # threshold 0.7: select when E + G' - G'' > tau * logit(0.7), so a higher tau selects fewer keys
    rates = []
    for tau in (0.1, 1.0, 5.0):
        m = build(temperature=tau, threshold=0.7).train()
        m.load_state_dict(hard[0.5].state_dict())
        run_with_state(m, state, *args)
        rates.append(float(m.last_selection_rate))
    assert rates[0] > rates[1] > rates[2]
    # soft mode: a tiny tau gives the hard selection, a large tau a visibly different, smoother one
    soft_cold, soft_warm, hard_cold = (build(soft=s, temperature=t).train() for s, t in ((True, 1e-7), (True, 5.0), (False, 1e-7)))
    for m in (soft_cold, soft_warm, hard_cold):
        m.load_state_dict(hard[0.5].state_dict())
    reference = run_with_state(hard_cold, state, *args)[0]
    torch.testing.assert_close(run_with_state(soft_cold, state, *args)[0], reference, atol=1e-6, rtol=1e-6)
    assert (run_with_state(soft_warm, state, *args)[0] - reference).abs().max() > 1e-2


def test_soft_mode_weights_every_real_key():
    module = build(soft=True).train()
    structure, q, k, v, hidden = inputs(4)
    weights, _ = compare_with_reference(module, structure, q, k, v, hidden)
    real = real_pairs(structure)
    assert torch.all(weights[real] > 0) and torch.all(weights[~real] == 0)


@pytest.mark.parametrize("training", [True, False])
def test_selection_rate_counts_selected_real_pairs(training):
    module = build(threshold=0.4).train(training)
    structure, q, k, v, hidden = inputs(5)
    module(q, k, v, structure, hidden=hidden)
    logits = energy(module, hidden)
    if training:
        logits = logits + replay_noise(module, (B, H, N, N), torch.float64)
    real = real_pairs(structure)
    selected = (torch.sigmoid(logits / module.temperature) > 0.4) & real
    rate = module.last_selection_rate
    assert isinstance(rate, torch.Tensor) and rate.is_floating_point()
    assert float(rate) == pytest.approx(float(selected.sum()) / float(real.sum()), abs=1e-7)


def test_penalty_is_the_mean_selection_probability():
    module = build(selection_penalty=0.25, threshold=0.6).train()
    with pytest.raises(RuntimeError, match="call the module first"):
        module.penalty()
    structure, q, k, v, hidden = inputs(6)
    module(q, k, v, structure, hidden=hidden)
    real = real_pairs(structure)
    shift = module.temperature * math.log(0.6 / 0.4)
    prob = torch.sigmoid(energy(module, hidden) - shift)[real].mean()
    torch.testing.assert_close(module.penalty(), 0.25 * prob)
    grads = torch.autograd.grad(module.penalty(), [module.policy_query.weight, module.policy_key.weight])
    assert all(g.abs().sum() > 0 for g in grads)
    # P(select) is what the noise realises: the average sampled selection rate approaches it
    rates = []
    with torch.no_grad():
        for _ in range(300):
            module(q, k, v, structure, hidden=hidden)
            rates.append(float(module.last_selection_rate))
    assert sum(rates) / len(rates) == pytest.approx(float(prob.detach()), abs=0.01)
    plain = build().train()
    plain(q, k, v, structure, hidden=hidden)
    assert float(plain.penalty()) == 0.0


def bias_oracle(module, structure):
    """The soft_bias table looked up per pair by the soft_bias oracle's bucketing (float64, 0 on padding)."""
    bias_module = module.structure_bias
    table = bias_module.table.double()
    b, n = structure.token_mask.shape
    rows = []
    for bi in range(b):
        for hi in range(H):
            for i in range(n):
                for j in range(n):
                    if not (structure.token_mask[bi, i] and structure.token_mask[bi, j]):
                        rows.append(table.new_zeros(()))
                        continue
                    m = reference_bucket(int(structure.distance[bi, i, j]), bias_module.max_distance, None, None)
                    rows.append(table[hi, m] if table.dim() == 2 else table[m])
    return torch.stack(rows).reshape(b, H, n, n)


@pytest.mark.parametrize("training", [True, False])
def test_composed_with_soft_bias(training):
    module = build(structure_bias="soft_bias", structure_bias_options={"max_distance": 3, "per_head": True}).train(training)
    with torch.no_grad():
        module.structure_bias.table.copy_(torch.randn(module.structure_bias.table.shape, dtype=torch.float64) * 2)
    structure, q, k, v, hidden = inputs(7)
    _, grads = compare_with_reference(module, structure, q, k, v, hidden, lambda: bias_oracle(module, structure))
    named = dict(module.named_parameters())
    table_grad = grads[4 + list(named).index("structure_bias.table")]
    assert table_grad.abs().sum() > 0
    # the instance requires "distance"; the class (plain ssan) requires nothing
    assert module.requires == {"distance"}
    type(module).check_fields({"token_mask"})
    with pytest.raises(ValueError, match="distance"):
        module.check_fields({"token_mask", "band", "is_global"}, source="provider 'window'")
    module.check_fields({"distance", "token_mask"})
    with pytest.raises(ValueError, match="needs structure field"):
        module(q, k, v, Structure(token_mask=structure.token_mask), hidden=hidden)
    with pytest.raises(ValueError, match="needs a structure"):
        module(q, k, v, None, hidden=hidden)


@pytest.mark.parametrize("training", [True, False])
def test_row_with_nothing_selected_gives_finite_zeros(training):
    module = build().train(training)
    with torch.no_grad():
        module.policy_key.weight.copy_(-module.policy_query.weight)
    structure, q, k, v, hidden = inputs(8)
    # batch row 1: every token has the same (large) input, so E_ij = -|W_Q' x|^2 << 0 for all pairs
    hidden = hidden.detach().clone()
    hidden[1] = 30.0 * torch.randn(DM, dtype=torch.float64)
    hidden.requires_grad_()
    out, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert torch.all(out[1] == 0) and torch.all(weights[1] == 0)
    assert out[0].abs().sum() > 0
    grads = torch.autograd.grad(out.square().sum() + out.sum(), [q, k, v, hidden, *module.parameters()])
    assert all(torch.isfinite(g).all() for g in grads)
    assert torch.all(grads[0][1] == 0) and torch.all(grads[2][1] == 0), "an empty row passes no gradient"
    ref_out, ref_weights = ssan_reference(module, q, k, v, structure.token_mask, hidden)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)


def test_generator_seed_replays_and_options_are_checked():
    structure, q, k, v, hidden = inputs(9)
    a, b = build(generator=5).train(), build(generator=torch.Generator().manual_seed(5)).train()
    b.load_state_dict(a.state_dict())
    assert torch.equal(a(q, k, v, structure, hidden=hidden), b(q, k, v, structure, hidden=hidden))
    build(generator=None)
    bad = [
        ({"temperature": 0.0}, "temperature"),
        ({"threshold": 1.0}, "threshold"),
        ({"selection_penalty": -1.0}, "selection_penalty"),
        ({"generator": "seed"}, "generator"),
        ({"structure_bias": "full"}, "bias"),
        ({"structure_bias": "nonexistent"}, "unknown attention variant"),
        ({"structure_bias_options": {"max_distance": 2}}, "without structure_bias"),
        ({"soft_mode": "paper"}, "soft_mode"),
        ({"soft_mode": "original"}, "soft=True"),
        ({"penalty_form": "sum"}, "penalty_form"),
        ({"entropy_weight": math.inf}, "entropy_weight"),
    ]
    for options, message in bad:
        with pytest.raises(ValueError, match=message):
            build(**options)
    module = build()
    with pytest.raises(ValueError, match="d_model"):
        module(q, k, v, structure, hidden=hidden[..., :4])
    with pytest.raises(ValueError, match="hidden=x"):
        module(q, k, v, structure)


def test_works_without_structure():
    module = build().eval()
    _, q, k, v, hidden = inputs(10, lengths=[7, 7])
    out = module(q, k, v, None, hidden=hidden)
    ref_out, _ = ssan_reference(module, q, k, v, None, hidden)
    torch.testing.assert_close(out, ref_out)


def test_gradients_through_returned_weights_and_retained_graph():
    module = build().train()
    structure, q, k, v, hidden = inputs(11)
    out, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    ref_out, ref_weights = ssan_reference(module, q, k, v, structure.token_mask, hidden)
    probe_out, probe_w = torch.randn_like(out), torch.randn_like(weights)
    leaves = [q, k, v, hidden, *module.parameters()]
    loss = (out * probe_out).sum() + (weights * probe_w).sum()
    first = torch.autograd.grad(loss, leaves, retain_graph=True)
    second = torch.autograd.grad(loss, leaves)
    want = torch.autograd.grad((ref_out * probe_out).sum() + (ref_weights * probe_w).sum(), leaves)
    for a, b_, w in zip(first, second, want):
        torch.testing.assert_close(a, w)
        torch.testing.assert_close(b_, w)


def test_underflowing_selection_falls_back_to_the_selected_maximum():
    """float32: the only unselected key scores 300 above the selected ones, so exp(s - max) underflows."""
    from structattn.attention.ssan_kernels import SelectiveAttention

    g = torch.Generator().manual_seed(12)
    b, h, n, d = 1, 2, 6, 4
    energy = torch.full((b, h, n, n), 10.0, dtype=torch.float64)
    energy[..., 0] = -10.0  # key 0 never selected
    q = torch.randn(b, h, n, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, h, n, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, h, n, d, generator=g, dtype=torch.float64)
    q[..., 0] = 10.0
    k[..., 0, :] = 0.0
    k[..., 0, 0] = 30.0  # s_i0 = 300 for every query
    real_k, real_q = torch.ones(b, 1, 1, n, dtype=torch.bool), torch.ones(b, 1, n, 1, dtype=torch.bool)
    results = {}
    for dtype in (torch.float32, torch.float64):
        leaves = [t.to(dtype).requires_grad_() for t in (energy, q, k, v)]
        out, w, _ = SelectiveAttention.apply(leaves[0], None, None, *leaves[1:], None, real_k, real_q, False, 0.5)
        grads = torch.autograd.grad((out * torch.arange(out.numel()).reshape(out.shape).sin()).sum(), leaves)
        results[dtype] = (out, w, grads)
    out32, w32, g32 = results[torch.float32]
    out64, w64, g64 = results[torch.float64]
    assert torch.isfinite(out32).all() and w32[..., 0].abs().max() == 0
    torch.testing.assert_close(w32.double(), w64, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out32.double(), out64, rtol=1e-5, atol=1e-6)
    for a, e in zip(g32[1:], g64[1:]):  # q, k, v
        torch.testing.assert_close(a.double(), e, rtol=1e-4, atol=1e-5)
    # the policy gradient of the selected keys is exact; the unselected key's is finite (capped at exp(80))
    torch.testing.assert_close(g32[0][..., 1:].double(), g64[0][..., 1:], rtol=1e-4, atol=1e-5)
    assert torch.isfinite(g32[0]).all()


# -- the original's semantics as options (Geng et al. 2020, the authors' TF code) ------------------------------
def with_policy_bias(module):
    """Non-zero random policy biases (``nn.Linear`` starts them non-zero too; re-drawn for a stronger test)."""
    with torch.no_grad():
        for proj in (module.policy_query, module.policy_key):
            proj.bias.copy_(torch.randn(proj.bias.shape, dtype=torch.float64))
    return module


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("soft,soft_mode", [(False, "ours"), (True, "ours"), (True, "original")])
@pytest.mark.parametrize("policy_bias", [False, True])
def test_options_match_reference(training, soft, soft_mode, policy_bias):
    module = build(soft=soft, soft_mode=soft_mode, policy_bias=policy_bias, temperature=0.7).train(training)
    assert (module.policy_query.bias is not None) == policy_bias
    if policy_bias:
        with_policy_bias(module)
    _, grads = compare_with_reference(module, *inputs(13))
    assert all(g.abs().sum() > 0 for g in grads[4:]), "every policy parameter must receive a gradient"


def test_original_soft_mode_is_sigmoid_of_e_in_training_and_hard_at_eval():
    module = build(soft=True, soft_mode="original", temperature=0.3).train()
    structure, q, k, v, hidden = inputs(14)
    state = module.last_noise_state
    _, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    assert module.last_noise_state is state, "the original soft mode draws no noise"
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    sel = torch.sigmoid(energy(module, hidden)) * real_pairs(structure)
    expected = sel * torch.exp(scores - scores.amax(-1, keepdim=True))
    torch.testing.assert_close(weights, (expected / expected.sum(-1, keepdim=True)).nan_to_num(0.0))
    module.eval()
    _, weights = module(q, k, v, structure, hidden=hidden, return_weights=True)
    selected = (torch.sigmoid(energy(module, hidden) / 0.3) > 0.5) & real_pairs(structure)
    assert torch.equal(weights > 0, selected & selected.any(-1, keepdim=True))


def original_penalty(module, structure, hidden, selection_weight, entropy_weight):
    """The authors' regulariser written from their code, per query in float64: ``sample`` (the action, with the
    straight-through gradient) summed over heads and real keys, ``nce = -H(sigmoid(E))`` averaged over heads
    and real keys, each averaged over the real queries of the batch."""
    e = energy(module, hidden)
    soft_original = module.soft and module.soft_mode == "original"
    if module.training and soft_original:
        action = torch.sigmoid(e)
    else:
        logits = e + replay_noise(module, e.shape, torch.float64) if module.training else e
        p = torch.sigmoid(logits / module.temperature)
        hard = (p > module.threshold).double() + (p - p.detach())
        action = p if module.soft and not soft_original else hard
    prob = torch.sigmoid(e)
    nce = prob * torch.log(prob) + (1 - prob) * torch.log(1 - prob)  # -H
    sample_total = nce_total = 0.0
    queries = 0
    for bi in range(e.shape[0]):
        keys = structure.token_mask[bi].nonzero().flatten()
        for i in keys.tolist():
            queries += 1
            sample_total = sample_total + action[bi, :, i, keys].sum()
            nce_total = nce_total + nce[bi, :, i, keys].mean()
    return selection_weight * sample_total / queries + entropy_weight * nce_total / queries


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("soft,soft_mode", [(False, "ours"), (True, "ours"), (True, "original")])
@pytest.mark.parametrize("weights", [(0.3, 0.0), (0.0, 0.7), (0.3, -0.7)], ids=["sample", "entropy", "both"])
def test_original_penalty_matches_an_independent_computation(training, soft, soft_mode, weights):
    selection_weight, entropy_weight = weights
    module = build(soft=soft, soft_mode=soft_mode, policy_bias=True, selection_penalty=selection_weight,
                   penalty_form="original", entropy_weight=entropy_weight, threshold=0.4).train(training)
    with_policy_bias(module)
    structure, q, k, v, hidden = inputs(15)
    module(q, k, v, structure, hidden=hidden)
    got = module.penalty()
    want = original_penalty(module, structure, hidden, selection_weight, entropy_weight)
    torch.testing.assert_close(got, want)
    leaves = [hidden, *module.parameters()]
    got_grads = torch.autograd.grad(got, leaves)
    for g, w in zip(got_grads, torch.autograd.grad(want, leaves)):
        torch.testing.assert_close(g, w)
    assert all(g.abs().sum() > 0 for g in got_grads[1:]), "the penalty must reach every policy parameter"


def test_entropy_term_adds_to_the_mean_probability_penalty():
    structure, q, k, v, hidden = inputs(16)
    plain = build(selection_penalty=0.25).train()
    both = build(selection_penalty=0.25, entropy_weight=0.5).train()
    both.load_state_dict(plain.state_dict())
    plain(q, k, v, structure, hidden=hidden)
    both(q, k, v, structure, hidden=hidden)
    entropy_only = original_penalty(both, structure, hidden, 0.0, 0.5)
    torch.testing.assert_close(both.penalty(), plain.penalty() + entropy_only)
