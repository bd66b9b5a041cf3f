"""``soft_bias``: buckets, init == full, per-head, learnable scale, unreachable vs padding, the custom CPU
backward (against autograd of the naive path and gradcheck), bf16, the flex backend."""

from __future__ import annotations

import copy

import pytest
import torch

from structattn.attention import bucket_bias as bb
from structattn.attention import masking
from structattn.attention import threads as worker_threads
from structattn.attention import get_attention
from structattn.attention.soft_bias import bucket_edges
from structattn.structures import Sentence, get_provider
from tests.attention.cases import dependency_structure, random_qkv, random_sentence
from tests.attention.cases.soft_bias import make
from tests.attention.conftest import B, D, H
from tests.reference.soft_bias import reference_bucket, soft_bias_reference

TOL = {"atol": 1e-9, "rtol": 1e-7}


@pytest.fixture
def torch_threads():
    """Set torch's thread count for one test (``None``: leave it); restored afterwards."""
    before = torch.get_num_threads()
    yield lambda count: count is not None and torch.set_num_threads(count)
    torch.set_num_threads(before)


def assert_matches_reference(module, structure, generator):
    q, k, v = random_qkv(B, H, structure.num_tokens, D, generator)
    out = module(q, k, v, structure)
    want, _ = soft_bias_reference(module, q, k, v, structure.distance, structure.token_mask)
    torch.testing.assert_close(out, want, **TOL)
    leaves = [q, k, v, *module.parameters()]
    grad_out = torch.randn(out.shape, generator=generator, dtype=out.dtype)
    for got, ref in zip(torch.autograd.grad(out, leaves, grad_out), torch.autograd.grad(want, leaves, grad_out)):
        torch.testing.assert_close(got, ref, **TOL)


def test_default_buckets_and_labels():
    module = get_attention("soft_bias", num_heads=H, head_dim=D)
    assert module.bucket_labels() == [str(x) for x in range(10)] + [">=10", "unreachable"]
    assert module.table.shape == (12,) and torch.all(module.table == 0) and module.scale is None
    assert get_attention("soft_bias", num_heads=H, head_dim=D, per_head=True).table.shape == (H, 12)


def test_log_bucket_labels():
    options = {"max_distance": 128, "log_buckets_from": 8, "num_log_buckets": 4}
    module = get_attention("soft_bias", num_heads=H, head_dim=D, **options)
    labels = [str(x) for x in range(8)] + ["8-15", "16-31", "32-63", "64-127", ">=128", "unreachable"]
    assert module.bucket_labels() == labels and module.table.shape == (len(labels),)


@pytest.mark.parametrize("options", [(10, None, None), (128, 8, 4), (6, 2, 2), (50, 3, 5)])
def test_bucket_index_matches_the_oracle_definition(options):
    max_distance, log_from, num_log = options
    distance = torch.arange(-1, 300, dtype=torch.int16).reshape(1, 1, -1).expand(1, 301, 301)
    token_mask = torch.ones(1, 301, dtype=torch.bool)
    index = bb.bucket_index(distance, token_mask, bucket_edges(*options))
    got = index[0, 0].tolist()
    want = [reference_bucket(x, max_distance, log_from, num_log) for x in range(-1, 300)]
    assert got == want


def test_bucket_index_codes_padding_apart_from_unreachable():
    distance = torch.tensor([[[0, -1, -1], [-1, 0, -1], [-1, -1, -1]]], dtype=torch.int16)
    token_mask = torch.tensor([[True, True, False]])
    index = bb.bucket_index(distance, token_mask, [0, 1, 2])  # K = 4 buckets, codes 4 and 5 for padding
    assert index.tolist() == [[[0, 3, 4], [3, 0, 4], [5, 5, 4]]]


@pytest.mark.parametrize(
    "options",
    [{"log_buckets_from": 4}, {"max_distance": 0}, {"max_distance": 5, "log_buckets_from": 4, "num_log_buckets": 3},
     {"backend": "triton"}],
)
def test_bad_options_rejected(options):
    with pytest.raises(ValueError, match="soft_bias"):
        get_attention("soft_bias", num_heads=H, head_dim=D, **options)


@pytest.mark.parametrize(
    "options",
    [{}, {"per_head": True}, {"learnable_scale": True},
     {"max_distance": 4, "log_buckets_from": 2, "num_log_buckets": 1}],
)
def test_untrained_module_equals_full(options, generator):
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator, torch.float32)
    soft = get_attention("soft_bias", num_heads=H, head_dim=D, **options)
    full = get_attention("full", num_heads=H, head_dim=D)
    torch.testing.assert_close(soft(q, k, v, structure), full(q, k, v, structure), atol=1e-6, rtol=1e-5)
    grads = torch.autograd.grad(soft(q, k, v, structure).sum(), [q, k, v])
    want = torch.autograd.grad(full(q, k, v, structure).sum(), [q, k, v])
    for got, ref in zip(grads, want):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-4)


def test_log_buckets_match_reference(generator):
    module = make(H, D, max_distance=6, log_buckets_from=2, num_log_buckets=2).double()
    assert module.bucket_labels() == ["0", "1", "2", "3-5", ">=6", "unreachable"]
    chain = Sentence(words=[f"w{i}" for i in range(12)], heads=[i - 1 for i in range(12)], id="chain")
    structure = get_provider("dependency").batch([chain, random_sentence(9, generator, "random")])
    assert int(structure.distance.max()) == 11
    assert_matches_reference(module, structure, generator)


def test_per_head_matches_reference(generator):
    module = make(H, D, per_head=True).double()
    assert module.table.shape == (H, 5)
    assert_matches_reference(module, dependency_structure([7, 5], generator, forests=True), generator)


def test_learnable_scale_matches_reference_and_scales_the_bias(generator):
    module = make(H, D, learnable_scale=True).double()
    structure = dependency_structure([7, 5], generator, forests=True)
    assert_matches_reference(module, structure, generator)
    before = module.bias(structure, B, H, torch.device("cpu"), torch.float64)
    with torch.no_grad():
        module.scale.mul_(2)
    torch.testing.assert_close(module.bias(structure, B, H, torch.device("cpu"), torch.float64), 2 * before)


def test_bias_values_unreachable_and_padding(generator):
    module = make(H, D, per_head=True)
    structure = dependency_structure([7, 5], generator, forests=True)
    bias = module.bias(structure, B, H, torch.device("cpu"), torch.float32)
    assert bias.shape == (B, H, 7, 7)
    real = structure.token_mask[:, :, None] & structure.token_mask[:, None, :]
    unreachable = real & (structure.distance < 0)
    assert unreachable.any(), "forests must contain unreachable real pairs"
    table = module.effective_table().detach()  # scale * table
    torch.testing.assert_close(bias.transpose(0, 1)[:, unreachable], table[:, -1:].expand(H, int(unreachable.sum())))
    assert torch.all(bias.transpose(0, 1)[:, ~real] == 0), "pairs with a padded token get no bias"
    assert get_attention("soft_bias", num_heads=H, head_dim=D).bias(structure, B, H, torch.device("cpu"), torch.float32).shape == (B, 1, 7, 7)


def test_unreachable_bucket_is_not_padding(generator):
    """A huge unreachable bias pulls weight onto unreachable real keys, never onto padded keys."""
    module = get_attention("soft_bias", num_heads=H, head_dim=D).double()
    structure = dependency_structure([7, 5], generator, forests=True)
    with torch.no_grad():
        module.table[-1] = 60.0
    q, k, v = random_qkv(B, H, 7, D, generator)
    _, weights = module(q, k, v, structure, return_weights=True)
    assert torch.all(weights[1, :, :, 5:] == 0)
    unreachable = (structure.distance < 0) & structure.token_mask[:, :, None] & structure.token_mask[:, None, :]
    mass = (weights * unreachable[:, None]).sum(-1)  # (b, h, n)
    rows = unreachable.any(-1)[:, None].expand_as(mass)
    assert torch.all(mass[rows] > 0.999)
    out = module(q, k, v, structure)
    (grad_table,) = torch.autograd.grad(out.sum(), [module.table])
    assert grad_table[-1] != 0


@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("chunk_elements", [bb.CHUNK_ELEMENTS, 40, 3])
@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("threads", [None, 3])
def test_custom_backward_equals_naive_autograd(
    per_head, chunk_elements, parallel, threads, generator, monkeypatch, torch_threads
):
    """BucketBiasSDPA (fused forward, chunked backward: whole heads, head groups, row blocks; tasks on worker
    threads, 3 threads for 2 sentences splitting the heads, or in sequence) == autograd of the eager path,
    padded query rows included (constant zeros)."""
    torch_threads(threads)
    monkeypatch.setattr(bb, "CHUNK_ELEMENTS", chunk_elements)
    monkeypatch.setattr(bb, "FORWARD_BIAS_ELEMENTS", chunk_elements)  # small: the forward goes sentence by sentence
    monkeypatch.setattr(worker_threads, "PARALLEL_BLOCKS", parallel)
    structure = dependency_structure([9, 6], generator, forests=True)
    q, k, v = random_qkv(B, H, 9, D, generator)
    table = torch.randn((H, 7) if per_head else (7,), generator=generator, dtype=torch.float64, requires_grad=True)
    index = bb.bucket_index(structure.distance, structure.token_mask, [0, 1, 2, 3, 4, 5])
    thread_count = torch.get_num_threads()
    out = bb.bucket_bias_attention(q, k, v, table, index, structure.token_mask)
    assert _graph_has(out, "BucketBiasSDPA")
    ext = bb.extend_table(table, masking.mask_value(torch.float64), torch.float64)
    allowed = (structure.token_mask[:, :, None] & structure.token_mask[:, None, :])[:, None]
    want, _ = masking.naive_attention(q, k, v, bias=bb.gather_bias(ext, index), allowed=allowed)
    torch.testing.assert_close(out, want, **TOL)
    grad_out = torch.randn(out.shape, generator=generator, dtype=out.dtype)
    got = torch.autograd.grad(out, [q, k, v, table], grad_out)
    assert torch.get_num_threads() == thread_count, "the backward must restore the thread count"
    for g, ref in zip(got, torch.autograd.grad(want, [q, k, v, table], grad_out)):
        torch.testing.assert_close(g, ref, **TOL)


@pytest.mark.parametrize("per_head", [False, True])
def test_custom_backward_gradcheck(per_head, generator):
    q, k, v = random_qkv(2, 2, 4, 3, generator)
    table = torch.randn((2, 4) if per_head else (4,), generator=generator, dtype=torch.float64, requires_grad=True)
    distance = torch.tensor([[0, 1, 2, -1], [1, 0, 1, -1], [2, 1, 0, -1], [-1, -1, -1, 0]], dtype=torch.int16)
    token_mask = torch.tensor([[True] * 4, [True, True, True, False]])
    index = bb.bucket_index(distance.expand(2, 4, 4), token_mask, [0, 1, 2])
    assert torch.autograd.gradcheck(lambda *x: bb.bucket_bias_attention(*x, index, token_mask), (q, k, v, table))


def test_per_sentence_restores_the_thread_count_after_an_error(torch_threads):
    torch_threads(2)

    def work(x: int) -> int:
        assert torch.get_num_threads() == 1, "workers run single-threaded torch ops"
        if x == 3:
            raise KeyError("boom")
        return x * 2

    assert worker_threads.per_sentence(work, [0, 1, 2], torch.device("cpu")) == [0, 2, 4]
    with pytest.raises(KeyError):
        worker_threads.per_sentence(work, range(5), torch.device("cpu"))
    assert torch.get_num_threads() == 2


def test_per_sentence_keeps_its_workers_and_starts_new_ones_after_a_fork(torch_threads, monkeypatch):
    """The worker threads persist between calls (a pool per call cost ~0.7 ms and cold threads); a forked child
    (another process id) or another thread count gets a pool of its own."""
    import os
    import threading

    torch_threads(2)
    cpu = torch.device("cpu")
    names = worker_threads.per_sentence(lambda x: threading.current_thread().name, range(4), cpu)
    assert all(name.startswith("structattn-worker") for name in names), names
    pool = worker_threads._workers(2)
    assert worker_threads.per_sentence(lambda x: x + 1, range(4), cpu) == [1, 2, 3, 4]
    assert worker_threads._workers(2) is pool, "the pool must outlive a call"
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a forked child: the threads are not there
    child = worker_threads._workers(2)
    assert child is not pool
    monkeypatch.undo()
    assert worker_threads._workers(3) is not child  # another thread count


def _graph_has(tensor: torch.Tensor, name: str) -> bool:
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if name in type(node).__name__:
            return True
        stack.extend(n for n, _ in node.next_functions)
    return False


def test_default_module_uses_the_custom_backward(generator):
    module = get_attention("soft_bias", num_heads=H, head_dim=D)
    assert module.backend == "sdpa"
    structure = dependency_structure([7, 5], generator)
    q, k, v = random_qkv(B, H, 7, D, generator, torch.float32)
    assert _graph_has(module(q, k, v, structure), "BucketBiasSDPA")
    with torch.no_grad():
        module(q, k, v, structure)  # inference: plain SDPA with a float mask, nothing saved


@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("forward_elements", [bb.FORWARD_BIAS_ELEMENTS, 50])
def test_inference_path_equals_training_path(per_head, forward_elements, generator, monkeypatch):
    """Under no_grad the fused kernel runs with the bias of a few sentences at a time; same values."""
    monkeypatch.setattr(bb, "FORWARD_BIAS_ELEMENTS", forward_elements)
    module = make(H, D, per_head=per_head).double()
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator)
    with torch.no_grad():
        fast = module(q, k, v, structure)
    want, _ = soft_bias_reference(module, q, k, v, structure.distance, structure.token_mask)
    torch.testing.assert_close(fast, want, **TOL)
    torch.testing.assert_close(fast, module(q, k, v, structure), **TOL)


@pytest.mark.parametrize("num_threads", [1, 2])
def test_forward_grouping_gives_the_same_bits(num_threads, generator, torch_threads, monkeypatch):
    """How many sentences share one fused forward call (FORWARD_BIAS_ELEMENTS) changes no bit of the output or
    its logsumexp: trained models and README numbers do not depend on it."""
    torch_threads(num_threads)
    q, k, v = (torch.randn(3, 4, 33, 8, generator=generator) for _ in range(3))
    index = bb.bucket_index(torch.randint(-1, 6, (3, 33, 33), generator=generator), torch.ones(3, 33, dtype=torch.bool),
                            [0, 1, 2, 3])
    ext = bb.extend_table(torch.randn(5, generator=generator), masking.mask_value(torch.float32), torch.float32)
    results = []
    for elements in (33 * 33, 2 * 33 * 33, 3 * 33 * 33):  # one, two, all three sentences per call
        monkeypatch.setattr(bb, "FORWARD_BIAS_ELEMENTS", elements)
        results.append(bb._flash_with_bias(q, k, v, ext, index))
    for out, lse in results[1:]:
        assert torch.equal(out, results[0][0]) and torch.equal(lse, results[0][1])


def test_naive_backend_equals_sdpa_backend(generator):
    structure = dependency_structure([7, 5], generator, forests=True)
    fast, slow = make(H, D, per_head=True).double(), make(H, D, per_head=True, backend="naive").double()
    q, k, v = random_qkv(B, H, 7, D, generator)
    torch.testing.assert_close(fast(q, k, v, structure), slow(q, k, v, structure), **TOL)


@pytest.mark.parametrize("per_head", [False, True])
def test_bfloat16_against_float64(per_head, generator):
    module = make(H, D, per_head=per_head, learnable_scale=True)
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = random_qkv(B, H, 7, D, generator, torch.bfloat16)
    out = module(q, k, v, structure)
    assert out.dtype == torch.bfloat16
    grads = torch.autograd.grad(out.float().sum(), [q, module.table])
    wide = [x.detach().double().requires_grad_() for x in (q, k, v)]
    module64 = make(H, D, per_head=per_head, learnable_scale=True).double()
    want = module64(*wide, structure)
    torch.testing.assert_close(out.double(), want, atol=3e-2, rtol=3e-2)
    want_grads = torch.autograd.grad(want.sum(), [wide[0], module64.table])
    torch.testing.assert_close(grads[0].double(), want_grads[0], atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(grads[1].double(), want_grads[1], atol=5e-2, rtol=2e-2)


def test_flex_backend_refuses_cpu_training(generator):
    module = make(H, D, backend="flex")
    structure = dependency_structure([7, 5], generator)
    q, k, v = random_qkv(B, H, 7, D, generator, torch.float32)
    with pytest.raises(ValueError, match="no CPU backward"):
        module(q, k, v, structure)


@pytest.mark.slow
def test_flex_cpu_forward_matches_sdpa(generator):
    """Compiles FlexAttention for CPU (gcc; ~10 s warm cache, ~40 s cold)."""
    structure = dependency_structure([7, 5], generator, forests=True)
    flex, fast = make(H, D, backend="flex"), make(H, D)
    q, k, v = (x.detach() for x in random_qkv(B, H, 7, D, generator, torch.float32))
    try:
        with torch.no_grad():
            got = flex(q, k, v, structure)
    except (RuntimeError, OSError, ImportError, NotImplementedError) as err:  # toolchain problems: reported
        pytest.xfail(f"FlexAttention CPU forward could not run here: {type(err).__name__}: {str(err)[:300]}")
    torch.testing.assert_close(got, fast(q, k, v, structure).detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["sdpa", "flex"])
def test_cuda_training_matches_reference(backend, generator):
    module = make(H, D, per_head=True, learnable_scale=True, backend=backend).cuda()
    structure = dependency_structure([7, 5], generator, forests=True)
    q, k, v = (x.detach().float().cuda().requires_grad_() for x in random_qkv(B, H, 7, D, generator))
    out = module(q, k, v, structure.to("cuda"))
    grads = torch.autograd.grad(out.sum(), [q, k, v, module.table, module.scale])
    cpu = make(H, D, per_head=True, learnable_scale=True).double()
    wide = [x.detach().cpu().double().requires_grad_() for x in (q, k, v)]
    want, _ = soft_bias_reference(cpu, *wide, structure.distance, structure.token_mask)
    want_grads = torch.autograd.grad(want.sum(), [*wide, cpu.table, cpu.scale])
    torch.testing.assert_close(out.double().cpu(), want, atol=1e-4, rtol=1e-4)
    for got, ref in zip(grads, want_grads):
        torch.testing.assert_close(got.double().cpu(), ref, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("name", ["soft_bias", "fixed_decay"])
def test_flex_cpu_inference_at_two_lengths(name, generator):
    """Regression: the flex call was compiled with dynamic shapes and failed (Inductor C++ compile error) at
    the second distinct sequence length under no_grad on CPU. Now static shapes, one graph per length."""
    module = make(H, D, backend="flex") if name == "soft_bias" else get_attention(name, num_heads=H, head_dim=D,
                                                                                   alpha=0.7, backend="flex")
    fast = copy.deepcopy(module)
    fast.backend = "sdpa"
    for lengths in ([5, 3], [6, 4]):
        structure = dependency_structure(lengths, generator, forests=True)
        q, k, v = (x.detach() for x in random_qkv(B, H, max(lengths), D, generator, torch.float32))
        with torch.no_grad():
            got = module(q, k, v, structure)
            want = fast(q, k, v, structure)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_bucket_codes_are_reused_across_layers_until_the_structure_changes(generator):
    """``distance_buckets`` memoises the codes of a structure: the layers of one forward share them, an in-place
    edit of the distance or the token mask (or a new structure) recomputes them, and the cache keeps nothing alive."""
    import gc
    import weakref

    from structattn.attention import soft_bias

    soft_bias.clear_bucket_cache()
    structure = dependency_structure([7, 5], generator)
    cpu, edges = torch.device("cpu"), bucket_edges(4)
    first, mask = soft_bias.distance_buckets(structure, 2, cpu, edges)
    assert soft_bias.distance_buckets(structure, 2, cpu, edges)[0] is first  # second layer: a hit
    assert soft_bias.distance_buckets(structure, 2, cpu, bucket_edges(3))[0] is not first  # other buckets
    structure.distance[0, 0, 1] = 3
    edited = soft_bias.distance_buckets(structure, 2, cpu, edges)[0]
    assert edited is not first and int(edited[0, 0, 1]) == 3
    structure.token_mask[0, 6] = False
    structure.distance[0, 6] = -1
    structure.distance[0, :, 6] = -1
    masked = soft_bias.distance_buckets(structure, 2, cpu, edges)[0]
    assert masked is not edited and int(masked[0, 0, 6]) == len(edges) + 1  # the padded-key code
    clone = copy.deepcopy(structure)
    assert soft_bias.distance_buckets(clone, 2, cpu, edges)[0] is not masked
    alive, entries = weakref.ref(clone), len(soft_bias._BUCKETS)
    del clone
    gc.collect()
    assert alive() is None, "the bucket cache must not keep a structure alive"
    assert len(soft_bias._BUCKETS) == entries - 1, "a freed structure's codes must leave the cache"
