"""``benchmarks/attention.py --floors``: the floors do the work they claim (ssan's floor: the SDPA layer plus the
policy projections, the policy scores with a fixed gradient and one uniform draw per pair; soft_bias's floors: SDPA
with a fixed float bias, and that forward with a backward that forms dS itself), and the script prints its floors
table."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from einops import rearrange

from structattn.attention import bucket_bias

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    """benchmarks/attention.py as a module (registered under its name while it runs: its dataclass needs that)."""
    if "bench_attention" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_attention", ROOT / "benchmarks" / "attention.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_attention"] = module
        spec.loader.exec_module(module)
    return sys.modules["bench_attention"]


def test_ssan_floor_layer_backpropagates_the_fixed_score_gradient_into_the_policy():
    bench = _bench()
    torch.manual_seed(0)
    layer = bench.FloorLayer(d_model=16, heads=2)
    x = torch.randn(3, 5, 16, requires_grad=True)
    out = layer(x, None)
    grad_out = torch.randn(out.shape)
    out.backward(grad_out)
    got = [t.grad.clone() for t in (x, layer.qkv.weight, layer.out.weight, layer.policy.weight)]
    assert layer.grad_scores.shape == (5, 5)  # one for every sentence and head

    # the same layer written out: SDPA layer output, plus the scores' term with the fixed gradient as a weight
    x.grad = None
    layer.zero_grad()
    q, k, v = rearrange(x @ layer.qkv.weight.T + layer.qkv.bias, "b n (three h d) -> three b h n d", three=3, h=2)
    plain = rearrange(F.scaled_dot_product_attention(q, k, v), "b h n d -> b n (h d)") @ layer.out.weight.T
    plain = plain + layer.out.bias
    pq, pk = rearrange(x @ layer.policy.weight.T, "b n (two h d) -> two b h n d", two=2, h=2)
    loss = (plain * grad_out).sum() + (pq @ pk.transpose(-1, -2) * layer.grad_scores).sum()
    loss.backward()
    want = [x.grad, layer.qkv.weight.grad, layer.out.weight.grad, layer.policy.weight.grad]
    torch.testing.assert_close(out, plain)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert got[3].abs().sum() > 0


def test_ssan_floor_draws_one_uniform_per_pair():
    bench = _bench()
    layer = bench.FloorLayer(d_model=8, heads=2)
    before = layer.generator.get_state()
    layer(torch.randn(2, 4, 8), None)
    replay = torch.Generator()
    replay.set_state(before)
    torch.empty(2 * 2 * 4 * 4).uniform_(generator=replay)
    assert torch.equal(layer.generator.get_state(), replay.get_state())


@pytest.mark.parametrize("pooled", [False, True], ids=["calling-thread", "worker-threads"])
def test_unfused_floor_gives_sdpa_gradients_block_by_block(monkeypatch, pooled):
    """The floor does all the work it stands for: q, k, v gradients of SDPA with the fixed bias, here over
    several row blocks (4 rows a block) and, with the thresholds lowered, on the worker threads."""
    bench = _bench()
    monkeypatch.setattr(bucket_bias, "BLOCK_ELEMENTS", 2 * 13 * 4)
    threads = torch.get_num_threads()
    if pooled:
        monkeypatch.setattr(bucket_bias, "PARALLEL_PAIRS", 1)
        monkeypatch.setattr(bucket_bias, "POOL_TASKS_PER_THREAD", 1)
        torch.set_num_threads(2)
    try:
        gen = torch.Generator().manual_seed(3)
        q, k, v = (torch.randn(3, 2, 13, 4, generator=gen, requires_grad=True) for _ in range(3))
        bias, grad_out = torch.randn(3, 1, 13, 13, generator=gen), torch.randn(3, 2, 13, 4, generator=gen)
        out = bench.UnfusedBias.apply(q, k, v, bias)
        out.backward(grad_out)
        got = [t.grad.clone() for t in (q, k, v)]
    finally:
        torch.set_num_threads(threads)
    for t in (q, k, v):
        t.grad = None
    want_out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    want_out.backward(grad_out)
    torch.testing.assert_close(out, want_out)
    for a, t in zip(got, (q, k, v)):
        torch.testing.assert_close(a, t.grad)


def test_matmul_flops_count_the_fused_cpu_kernel_and_the_inplace_products():
    """The counter sees every product of a step. SDPA layer: the projections (4 D^2 a token, 3 passes) and the
    fused kernel (2 products forward, 5 backward); ssan does exactly its floor's products, which add the policy
    projections (2 D^2 a token) and the policy scores (1 product forward, 2 backward); soft_bias and its
    unfused floor do SDPA's products, in blocks."""
    bench = _bench()
    b, n, h, width = 2, 12, 8, bench.D_MODEL
    d = width // h
    product = 2 * b * h * n * n * d  # FLOPs of one (n x d) (d x n) product per head
    count = {name: bench.matmul_flops(bench.build(bench.Spec("zoo", name, n, b, h))[0])
             for name in ("sdpa_layer", "ssan_floor", "ssan", "sdpa", "unfused_bias", "soft_bias")}
    assert d == 64
    layer = 3 * 2 * b * n * 4 * width * width + 7 * product
    assert count["sdpa_layer"] == layer
    assert count["ssan_floor"] == count["ssan"] == layer + 3 * 2 * b * n * 2 * width * width + 3 * product
    assert count["sdpa"] == count["unfused_bias"] == count["soft_bias"] == 7 * product


def test_floors_table_is_printed():
    """Runs both soft_bias floors and the variant at the quick sizes (a few seconds)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "attention.py"), "--quick", "--only", "soft_bias", "--floors",
         "--no-memory", "--threads", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    table = done.stdout.split("### Floors", 1)[1]
    for floor in ("sdpa_bias", "unfused_bias"):
        rows = [line for line in table.splitlines() if line.startswith(f"| soft_bias | {floor} |")]
        assert [row.split("|")[3].strip() for row in rows] == ["64", "128"]
        assert [row.split("|")[10].strip() for row in rows] == ["1.000x / 1.000x"] * 2  # matmul FLOPs
