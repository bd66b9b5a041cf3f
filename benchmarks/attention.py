"""Benchmark: every registered attention variant against plain SDPA, and local_global against dense masked SDPA.

    python benchmarks/attention.py                         # full run: wall clock, torch's default threads
                                                           # (about 4 minutes on 2 idle cores)
    python benchmarks/attention.py --threads 1 --clock cpu # robust figures on a shared, busy machine
                                                           # (about 6-12 minutes)
    python benchmarks/attention.py --quick                 # smoke run: small sizes, 2 rounds, no n=32768
    python benchmarks/attention.py --only ssan             # one variant (local_global: also the long table;
                                                           # soft_bias: also n = 2048)
    python benchmarks/attention.py --no-memory             # times only
    python benchmarks/attention.py --only soft_bias --floors   # also against the cheapest work the method needs
    python benchmarks/attention.py --cell-seconds 30       # more rounds per cell (long sentences get 2 at 6 s)

Time: in this process, side by side. Each round runs the baseline then the variant (interleaved, so both see
the same load from other processes); a figure is the best round (the least disturbed) and the ratio is
best / best. ``--clock cpu`` uses the process CPU time instead of wall time: with ``--threads 1`` it does not
count time the process spent descheduled, which makes ratios stable on a machine shared with other jobs.
"fwd+bwd" is a training step (module in train mode; ``out.backward(dO)`` with a fixed random ``dO``: the
stride-0 gradient of ``out.sum()`` made backward kernels that read ``dO`` block by block 3-4% faster than real
gradients do); "fwd" is inference
(``module.eval()`` under ``torch.no_grad()``). Rounds per cell adapt to its cost (``--reps`` at most, 2 at least).

Peak memory: one fresh subprocess per table runs every configuration in turn with
``MALLOC_MMAP_THRESHOLD_=65536`` (so every tensor above 64 KiB is its own mapping, returned to the OS when
freed). Per configuration, after one warm-up call of each kind and ``gc.collect()``, the worker records
``VmRSS``, resets the kernel's peak (``/proc/self/clear_refs`` <- 5), runs one call and reads ``VmHWM``: the
figure is ``VmHWM - VmRSS``, the extra resident memory at the peak of one call, inputs and parameters excluded
(their gradients included).

Zoo table: b = 8, h = 8, d_model = 512 (d = 64), one random recursive tree per sentence through the
``dependency`` provider (``local_global``: the ``window`` provider, radius 64, first and last token global),
all sentences of length n (no padding), float32, default options of each variant (``soft_bias``: its learnable
table). Attention-level variants are timed on the attention call (structure prepared beforehand) against
``F.scaled_dot_product_attention(q, k, v)``. ``ssan`` is timed as a whole layer (fused q/k/v projection, ssan
with its own policy projections, output projection) against the same layer with SDPA; also at b = 32,
n = 128. Long table: ``local_global`` (radius 64, 2 global tokens, b = 1, h = 8, d = 64) against dense SDPA
with the boolean mask ``band_distance(...) >= 0`` built inside the timed call (up to n = 8192), plus the peak
memory of one n = 32768 training step; and against plain unmasked SDPA (up to n = 8192), whose fused kernel
needs no n x n buffer either: local_global's gain over it is time (linear vs quadratic), not memory.

Floors (``--floors``, soft_bias and ssan only): the variant and a *floor* (the least work any implementation of
the method must do with torch's CPU kernels) are each timed right after the baseline, in alternating order.
soft_bias has two floors. ``sdpa_bias`` is SDPA with a fixed float bias that needs no gradient: torch's fused
kernel with any additive bias, so ``variant / floor`` is what the learnable table's gradient costs on top.
``unfused_bias`` is what any gradient of the bias needs with torch's CPU kernels, whose fused backward does not
return the score gradient ``dS``: the same fused forward, and a backward that forms ``dS`` itself, in blocks of
query rows (all heads, :data:`structattn.attention.bucket_bias.BLOCK_ELEMENTS` scores a block), sentences
spread over threads as soft_bias's are: ``P = exp(S + bias - lse)``, ``dS = P * (dO v^T - rowsum(dO * O))``,
``dq = dS k``, ``dk = dS^T q``, ``dv = P^T dO``: five products and one ``exp`` a block, nothing for a table
(no bias gather, no sum over heads, no binning), so ``variant / unfused_bias`` is what the table's own work
costs. ssan's floor
(``ssan_floor``) is the plain SDPA layer plus the work SSAN adds by definition and nothing else: its two policy
projections, one logistic draw per (head, query, key) pair (the Gumbel noise: a uniform, serial on torch's CPU
generator, and ``logit_``) into a buffer that the policy scores ``pq pk^T`` are added to, and both gradients of
those scores in backward (from a fixed random ``n x n`` gradient shared by every sentence and head, so that no
elementwise pass is added); no sigmoid, selection or renormalised softmax. The floors table also gives the
matrix-product FLOPs of the floor and of the variant against the baseline's (:func:`matmul_flops`:
``torch.utils.flop_counter``, the fused CPU kernel counted as its CUDA siblings are): the work that no kernel
can skip, before any elementwise pass.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn
from torch.utils import flop_counter

from structattn.attention import attention_names, bucket_bias, get_attention
from structattn.structures import Sentence, get_provider
from structattn.structures.window_math import band_distance
from structattn.testing.inputs import random_heads

ZOO_SIZES, ZOO_QUICK = (64, 128, 256, 512, 1024), (64, 128)
LONG_SIZES, LONG_QUICK = (512, 1024, 2048, 4096, 8192, 16384), (512, 1024, 2048)
DENSE_MAX = 8192  # dense masked SDPA above this is skipped (its n x n mask and time grow quadratically)
B, H, D_MODEL = 8, 8, 512
LONG_B, LONG_H, RADIUS, HUGE_N = 1, 8, 64, 32768
DEFAULT_CELL_SECONDS = 6.0  # time budget per timed cell; sets the number of rounds (``--cell-seconds``)
CELL_SECONDS = DEFAULT_CELL_SECONDS
SOFT_BIAS_LONG = 2048  # soft_bias also runs here, alone (a target of its own)


@dataclass(frozen=True)
class Spec:
    """One configuration: ``name`` is a variant, ``"sdpa"`` (attention), ``"sdpa_layer"`` or ``"dense"``."""

    table: str  # "zoo" or "long"
    name: str
    n: int
    b: int
    h: int


# ---------------------------------------------------------------- inputs

def structure_for(name: str, b: int, n: int, gen: torch.Generator):
    if name in ("local_global", "dense"):
        words = [Sentence(words=["w"] * n, id=f"s{i}") for i in range(b)]
        return get_provider("window", radius=RADIUS, global_tokens=(0, "last")).batch(words)
    sentences = [Sentence(words=["w"] * n, heads=random_heads(n, gen), id=f"s{i}") for i in range(b)]
    return get_provider("dependency").batch(sentences)


class Layer(nn.Module):
    """Fused q/k/v projection -> attention -> output projection (``attention=None``: plain SDPA)."""

    def __init__(self, d_model: int, heads: int, attention: nn.Module | None) -> None:
        super().__init__()
        self.heads, self.attention = heads, attention
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, structure) -> torch.Tensor:
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        if self.attention is None:
            a = F.scaled_dot_product_attention(q, k, v)
        else:
            a = self.attention(q, k, v, structure, hidden=x)
        return self.out(rearrange(a, "b h n d -> b n (h d)"))


class _PolicyFloor(torch.autograd.Function):
    """ssan's floor work beside ``out`` (returned as it is): forward draws one logistic variate per (sentence,
    head, query, key) (a uniform and ``logit_``, as ssan does) and adds the policy scores ``pq pk^T`` into that
    buffer (as ssan builds its logits); backward gives the scores a fixed gradient ``G`` (one ``(n, n)`` matrix
    for every sentence and head, so that it stays in cache and adds no elementwise pass) and returns ``G pk``
    and ``G^T pq``."""

    @staticmethod
    def forward(ctx, out, pq, pk, grad_scores, generator):
        b, h, n, _ = pq.shape
        scores = torch.empty(b * h, n, n, dtype=pq.dtype).uniform_(generator=generator)
        scores.logit_(eps=torch.finfo(pq.dtype).tiny)  # standard logistic noise, as ssan draws it
        scores.baddbmm_(pq.reshape(b * h, n, -1), pk.reshape(b * h, n, -1).transpose(1, 2))
        ctx.save_for_backward(pq, pk)
        ctx.grad_scores = grad_scores
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad_out):
        pq, pk = ctx.saved_tensors
        g = ctx.grad_scores
        return grad_out, torch.matmul(g, pk), torch.matmul(g.T, pq), None, None


class FloorLayer(Layer):
    """ssan's floor: the SDPA layer plus SSAN's policy projections, policy scores (with their gradients) and
    one logistic draw per pair (see the module docstring)."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__(d_model, heads, None)
        self.policy = nn.Linear(d_model, 2 * d_model, bias=False)
        self.generator = torch.Generator().manual_seed(0)
        self.grad_scores: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, structure) -> torch.Tensor:
        out = super().forward(x, structure)
        pq, pk = rearrange(self.policy(x), "b n (two h d) -> two b h n d", two=2, h=self.heads)
        if self.grad_scores is None or self.grad_scores.shape[0] != x.shape[1]:
            self.grad_scores = torch.randn(x.shape[1], x.shape[1], generator=torch.Generator().manual_seed(8))
        return _PolicyFloor.apply(out, pq, pk, self.grad_scores, self.generator)


def build(spec: Spec) -> tuple[Callable[[], None], Callable[[], None]]:
    """``(train_step, inference)`` closures over prepared inputs (the structure is built here, untimed)."""
    gen = torch.Generator().manual_seed(spec.n)
    torch.manual_seed(spec.n)
    d = D_MODEL // spec.h
    if spec.name in ("ssan", "sdpa_layer", "ssan_floor"):
        attention = None
        if spec.name == "ssan":
            attention = get_attention("ssan", num_heads=spec.h, head_dim=d, d_model=D_MODEL, generator=0)
        layer = FloorLayer(D_MODEL, spec.h) if spec.name == "ssan_floor" else Layer(D_MODEL, spec.h, attention)
        structure = structure_for("dependency", spec.b, spec.n, gen)
        x = torch.randn(spec.b, spec.n, D_MODEL, generator=gen, requires_grad=True)
        return _closures(layer, lambda: layer(x, structure), [x])
    q, k, v = (torch.randn(spec.b, spec.h, spec.n, d, generator=gen, requires_grad=True) for _ in range(3))
    if spec.name == "sdpa":
        return _closures(None, lambda: F.scaled_dot_product_attention(q, k, v), [q, k, v])
    if spec.name == "sdpa_bias":  # soft_bias's floor: the fused kernel with a fixed float bias, no bias gradient
        bias = torch.randn(spec.b, 1, spec.n, spec.n, generator=gen)
        return _closures(None, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias), [q, k, v])
    if spec.name == "unfused_bias":  # soft_bias's second floor: a fixed bias, dS formed outside the fused kernel
        bias = torch.randn(spec.b, 1, spec.n, spec.n, generator=gen)
        return _closures(None, lambda: UnfusedBias.apply(q, k, v, bias), [q, k, v])
    structure = structure_for(spec.name, spec.b, spec.n, gen)
    if spec.name == "dense":

        def dense() -> torch.Tensor:
            allowed = band_distance(structure.token_mask, RADIUS, structure.dilation, structure.is_global) >= 0
            return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed[:, None])

        return _closures(None, dense, [q, k, v])
    module = get_attention(spec.name, num_heads=spec.h, head_dim=d)
    hidden = torch.randn(spec.b, spec.n, spec.h * d, generator=gen) if module.needs_hidden else None
    return _closures(module, lambda: module(q, k, v, structure, hidden=hidden), [q, k, v])


def backward_fixed(out: torch.Tensor, grad: list[torch.Tensor]) -> None:
    """``out.backward(dO)`` with a random ``dO`` (seeded) drawn into the empty list ``grad`` on the first call
    (the warm-up) and reused after, as a real loss's gradient would be: not ``out.sum()``, whose stride-0
    gradient lets a backward read ``dO`` from a few cached values."""
    if not grad:
        gen = torch.Generator(device=out.device).manual_seed(7)
        grad.append(torch.randn(out.shape, generator=gen, dtype=out.dtype, device=out.device))
    out.backward(grad[0])


def _closures(module: nn.Module | None, call: Callable[[], torch.Tensor], leaves: list[torch.Tensor]):
    grad: list[torch.Tensor] = []  # dO, see backward_fixed

    def train_step() -> None:
        if module is not None:
            module.train()
        backward_fixed(call(), grad)
        for t in leaves:
            t.grad = None
        if module is not None:
            module.zero_grad(set_to_none=True)

    def inference() -> None:
        if module is not None:
            module.eval()
        with torch.no_grad():
            call()

    return train_step, inference


# ---------------------------------------------------------------- measurement

CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = time.perf_counter


def timed(fn: Callable[[], None]) -> float:
    start = _clock()
    fn()
    return _clock() - start


def _rounds(first: float, max_reps: int) -> int:
    """Rounds of a cell whose warm-up round took ``first`` seconds: :data:`CELL_SECONDS` worth, 2 to ``max_reps``."""
    return max(2, min(max_reps, int(CELL_SECONDS / max(first, 1e-6))))


def compare_times(base: Callable[[], None], variant: Callable[[], None], max_reps: int) -> tuple[float, float, float]:
    """Best (least disturbed) time of the baseline and of the variant over interleaved rounds, and their ratio."""
    reps = _rounds(timed(base) + timed(variant), max_reps)  # the warm-up sizes the number of rounds
    pairs = [(timed(base), timed(variant)) for _ in range(reps)]
    best_base, best_variant = min(p[0] for p in pairs), min(p[1] for p in pairs)
    return best_base, best_variant, best_variant / best_base


def compare_floor(base: Callable[[], None], floor: Callable[[], None], variant: Callable[[], None],
                  max_reps: int) -> dict[str, float]:
    """Best times of the baseline, the floor and the variant, each of the two timed right after a baseline
    call, in alternating order from round to round; ratios best / best."""
    reps = _rounds(timed(base) + timed(floor) + timed(variant), max_reps)
    bases, floors, variants = [], [], []
    for r in range(reps):
        for fn, into in ((floor, floors), (variant, variants))[:: 1 if r % 2 == 0 else -1]:
            bases.append(timed(base))
            into.append(timed(fn))
    best_base, best_floor, best_variant = min(bases), min(floors), min(variants)
    return {"base_t": best_base, "floor_t": best_floor, "var_t": best_variant, "floor_ratio": best_floor / best_base,
            "time_ratio": best_variant / best_base, "over_floor": best_variant / best_floor}


class UnfusedBias(torch.autograd.Function):
    """soft_bias's ``unfused_bias`` floor (see the module docstring): ``softmax(q k^T / sqrt(d) + bias) v`` by
    torch's fused CPU kernel, and a backward for ``q``, ``k``, ``v`` that forms ``dS`` block by block.

    Shapes: q, k, v ``(b, h, n, d)`` float32; bias ``(b, 1, n, n)`` (no gradient).
    """

    @staticmethod
    def forward(ctx, q, k, v, bias):
        out, lse = bucket_bias._FLASH_CPU(q, k, v, attn_mask=bias)  # the kernel soft_bias's forward calls
        ctx.save_for_backward(q, k, v, bias, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, bias, out, lse = ctx.saved_tensors
        b, h, n, _ = q.shape
        neg_delta = (grad_out * out).sum(-1, keepdim=True).neg_()
        grads = tuple(torch.empty_like(q) for _ in range(3))
        rows = max(1, min(n, bucket_bias.BLOCK_ELEMENTS // (h * n)))

        @torch.no_grad()
        def sentence(bi: int) -> None:
            (dq, dk, dv), scale = (g[bi] for g in grads), q.shape[-1] ** -0.5
            k_t, v_t = k[bi].transpose(1, 2), v[bi].transpose(1, 2)
            for a in range(0, n, rows):
                z, beta = min(n, a + rows), float(a > 0)
                qs, go = q[bi, :, a:z], grad_out[bi, :, a:z]
                p = torch.baddbmm(bias[bi, :, a:z] - lse[bi, :, a:z, None], qs, k_t, alpha=scale).exp_()
                ds = torch.baddbmm(neg_delta[bi, :, a:z], go, v_t).mul_(p)
                dq[:, a:z].baddbmm_(ds, k[bi], beta=0.0, alpha=scale)
                dk.baddbmm_(ds.transpose(1, 2), qs, beta=beta, alpha=scale)
                dv.baddbmm_(p.transpose(1, 2), go, beta=beta)

        bucket_bias._for_sentences(sentence, range(b), n * n, q.device)
        return (*grads, None)


FLOORS = {"soft_bias": ("sdpa", ("sdpa_bias", "unfused_bias")), "ssan": ("sdpa_layer", ("ssan_floor",))}


def _flash_cpu_flops(q, k, v, *_args, **_kwargs) -> int:
    return flop_counter.sdpa_flop_count(q, k, v)


def _flash_cpu_backward_flops(grad_out, q, k, v, *_args, **_kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out, q, k, v)


def _inplace_product_flops(_target, a, b, *_args, **_kwargs) -> int:
    return flop_counter.bmm_flop(a, b) if len(a) == 3 else flop_counter.mm_flop(a, b)


#: What torch's flop counter lacks for these steps: the fused CPU kernel (forward and backward, counted as its
#: CUDA siblings are) and the in-place products the blocked backward kernels accumulate with.
_FLOP_FORMULAS = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _flash_cpu_flops,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _flash_cpu_backward_flops,
    torch.ops.aten.baddbmm_: _inplace_product_flops,
    torch.ops.aten.addmm_: _inplace_product_flops,
}


def matmul_flops(step: Callable[[], None]) -> int:
    """Matrix-product FLOPs of one call of ``step`` (``torch.utils.flop_counter``: products and attention
    kernels only, no elementwise work), counted on one thread (the counter sees only the calling thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with flop_counter.FlopCounterMode(display=False, custom_mapping=_FLOP_FORMULAS) as counter:
            step()
    finally:
        torch.set_num_threads(threads)
    return counter.get_total_flops()


def floor_table(names: list[str], sizes: tuple[int, ...], max_reps: int) -> None:
    """Prints soft_bias and ssan against their floors (see the module docstring), fwd+bwd."""
    rows = []
    for name in (x for x in names if x in FLOORS):
        base_name, floor_names = FLOORS[name]
        for floor_name in floor_names:
            for n in sizes:
                fns = [build(Spec("zoo", x, n, B, H))[0] for x in (base_name, floor_name, name)]
                cell = compare_floor(*fns, max_reps)
                base_flops, floor_flops, var_flops = (matmul_flops(fn) for fn in fns)
                cell.update(floor_flops=floor_flops / base_flops, var_flops=var_flops / base_flops)
                del fns
                gc.collect()
                rows.append((name, floor_name, n, cell))
                print(f"  {name} n={n}: floor {floor_name} {cell['floor_ratio']:.2f}x, variant "
                      f"{cell['time_ratio']:.2f}x ({cell['over_floor']:.2f}x the floor)", file=sys.stderr, flush=True)
    print(f"\n### Floors: fwd+bwd, the variant and the least work its method needs, each vs SDPA (b={B}, h={H})\n")
    print("| variant | floor | n | SDPA ms | floor ms | variant ms | floor vs SDPA | variant vs SDPA | variant vs floor "
          "| matmul FLOPs vs SDPA: floor / variant |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, floor_name, n, c in rows:
        print(f"| {name} | {floor_name} | {n} | {c['base_t'] * 1e3:.1f} | {c['floor_t'] * 1e3:.1f} "
              f"| {c['var_t'] * 1e3:.1f} | {c['floor_ratio']:.2f}x | {c['time_ratio']:.2f}x | {c['over_floor']:.2f}x "
              f"| {c['floor_flops']:.3f}x / {c['var_flops']:.3f}x |")


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def peak_extra_bytes(fn: Callable[[], None]) -> int:
    """Peak resident memory of one call above the resident memory before it (see the module docstring)."""
    gc.collect()
    before = _status()["VmRSS"]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    fn()
    return _status()["VmHWM"] - before


def worker(specs: list[Spec]) -> None:
    """Subprocess entry: for each spec, the peak extra memory of one inference and one training call (JSON)."""
    results = []
    for spec in specs:
        try:
            train_step, inference = build(spec)
            train_step()
            inference()
            results.append({"fwd": peak_extra_bytes(inference), "fwdbwd": peak_extra_bytes(train_step)})
            del train_step, inference
        except RuntimeError as err:  # e.g. out of memory: report, keep going
            results.append({"error": str(err).splitlines()[0]})
        gc.collect()
    print(json.dumps(results))


def measure_memory(specs: list[Spec], threads: int) -> list[dict | None]:
    """Run :func:`worker` in one fresh subprocess with ``MALLOC_MMAP_THRESHOLD_=65536`` (see the docstring)."""
    if not specs:
        return []
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS=str(threads))
    payload = json.dumps([asdict(s) for s in specs])
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", payload, "--threads", str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        print(f"  memory worker failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return [None] * len(specs)
    return [None if "error" in r else r for r in json.loads(done.stdout.strip().splitlines()[-1])]


# ---------------------------------------------------------------- tables

MiB = 2**20


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def zoo_table(names: list[str], sizes: tuple[int, ...], max_reps: int, memory: bool, threads: int) -> dict:
    results: dict = {}
    pairs = []  # (label, n, variant spec, baseline spec)
    for name in names:
        base_name = "sdpa_layer" if name == "ssan" else "sdpa"
        for n in sizes:
            spec, base_spec = Spec("zoo", name, n, B, H), Spec("zoo", base_name, n, B, H)
            v_train, v_inf = build(spec)
            b_train, b_inf = build(base_spec)
            cell = dict(zip(("base_t", "var_t", "time_ratio"), compare_times(b_train, v_train, max_reps)))
            cell.update(zip(("base_f", "var_f", "fwd_ratio"), compare_times(b_inf, v_inf, max_reps)))
            del v_train, v_inf, b_train, b_inf
            gc.collect()
            results[(name, n)] = cell
            pairs.append((f"{name} (layer)" if name == "ssan" else name, name, n, spec, base_spec))
            print(f"  {name} n={n}: fwd+bwd {cell['time_ratio']:.2f}x, fwd {cell['fwd_ratio']:.2f}x", file=sys.stderr, flush=True)
    if memory:
        base_specs = sorted({p[4] for p in pairs}, key=lambda x: (x.name, x.n))
        measured = measure_memory([p[3] for p in pairs] + base_specs, threads)
        base_mem = dict(zip(base_specs, measured[len(pairs):]))
        for (label, name, n, spec, base_spec), vm in zip(pairs, measured[: len(pairs)]):
            bm = base_mem[base_spec]
            if vm and bm:
                results[(name, n)].update(var_m=vm, base_m=bm, mem_ratio=vm["fwdbwd"] / max(bm["fwdbwd"], 1),
                                          fwd_mem_ratio=vm["fwd"] / max(bm["fwd"], 1))
    print(f"\n### Variants vs plain SDPA (b={B}, h={H}, d_model={D_MODEL}, float32; ssan: whole layer vs SDPA layer)\n")
    print("| variant | n | fwd+bwd ms | SDPA ms | ratio | fwd ms | SDPA ms | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for label, name, n, _, _ in pairs:
        c = results[(name, n)]
        print(f"| {label} | {n} | {c['var_t'] * 1e3:.1f} | {c['base_t'] * 1e3:.1f} | {c['time_ratio']:.2f}x "
              f"| {c['var_f'] * 1e3:.1f} | {c['base_f'] * 1e3:.1f} | {c['fwd_ratio']:.2f}x |")
    if memory:
        print("\n| variant | n | peak MiB fwd+bwd | SDPA MiB | ratio | peak MiB fwd | SDPA MiB | ratio |")
        print("|---|---|---|---|---|---|---|---|")
        for label, name, n, _, _ in pairs:
            c = results[(name, n)]
            if "var_m" not in c:
                print(f"| {label} | {n} | - | - | - | - | - | - |")
                continue
            vm, bm = c["var_m"], c["base_m"]
            print(f"| {label} | {n} | {vm['fwdbwd'] / MiB:.1f} | {bm['fwdbwd'] / MiB:.1f} | {c['mem_ratio']:.2f}x "
                  f"| {vm['fwd'] / MiB:.1f} | {bm['fwd'] / MiB:.1f} | {c['fwd_mem_ratio']:.2f}x |")
    return results


def slope(xs: list[int], ys: list[float]) -> float:
    """Least-squares slope of log(y) on log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def long_table(sizes: tuple[int, ...], max_reps: int, memory: bool, threads: int, huge: bool) -> dict:
    res: dict = {"n": list(sizes)}
    for n in sizes:
        lg_train, lg_inf = build(Spec("long", "local_global", n, LONG_B, LONG_H))
        row: dict = {}
        if n <= DENSE_MAX:
            d_train, d_inf = build(Spec("long", "dense", n, LONG_B, LONG_H))
            row.update(zip(("dense_t", "lg_t", "ratio_t"), compare_times(d_train, lg_train, max_reps)))
            row.update(zip(("dense_f", "lg_f", "ratio_f"), compare_times(d_inf, lg_inf, max_reps)))
            p_train, _ = build(Spec("long", "sdpa", n, LONG_B, LONG_H))
            row.update(zip(("plain_t", "lg_t2", "ratio_plain_t"), compare_times(p_train, lg_train, max_reps)))
            del d_train, d_inf, p_train
        else:
            lg_train(), lg_inf()
            row["lg_t"] = min(timed(lg_train) for _ in range(max(2, min(max_reps, 3))))
            row["lg_f"] = min(timed(lg_inf) for _ in range(max(2, min(max_reps, 3))))
        del lg_train, lg_inf
        gc.collect()
        res[n] = row
        print(f"  local_global n={n}: {row['lg_t'] * 1e3:.0f} ms fwd+bwd", file=sys.stderr, flush=True)
    if memory:
        specs = [Spec("long", "local_global", n, LONG_B, LONG_H) for n in sizes]
        specs += [Spec("long", "dense", n, LONG_B, LONG_H) for n in sizes if n <= DENSE_MAX]
        specs += [Spec("long", "sdpa", n, LONG_B, LONG_H) for n in sizes if n <= DENSE_MAX]
        specs += [Spec("long", "local_global", HUGE_N, LONG_B, LONG_H)] if huge else []
        measured = dict(zip(specs, measure_memory(specs, threads)))
        for n in sizes:
            lm = measured.get(Spec("long", "local_global", n, LONG_B, LONG_H))
            dm = measured.get(Spec("long", "dense", n, LONG_B, LONG_H))
            res[n]["lg_m"] = lm["fwdbwd"] if lm else None
            res[n]["dense_m"] = dm["fwdbwd"] if dm else None
            res[n]["ratio_m"] = lm["fwdbwd"] / dm["fwdbwd"] if lm and dm else None
            pm = measured.get(Spec("long", "sdpa", n, LONG_B, LONG_H))
            res[n]["plain_m"] = pm["fwdbwd"] if pm else None
            res[n]["ratio_plain_m"] = lm["fwdbwd"] / pm["fwdbwd"] if lm and pm else None
        if huge:
            hm = measured.get(Spec("long", "local_global", HUGE_N, LONG_B, LONG_H))
            res["huge"] = hm
    print(f"\n### local_global vs dense masked SDPA (radius {RADIUS}, 2 global tokens, b={LONG_B}, h={LONG_H}, d=64)\n")
    print("| n | local_global fwd+bwd ms | dense ms | ratio | local_global fwd ms | dense ms | ratio | peak MiB fwd+bwd | dense MiB | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        row = res[n]

        def ms(key: str) -> str:
            return f"{row[key] * 1e3:.1f}" if key in row else "-"

        def mib(key: str) -> str:
            return f"{row[key] / MiB:.1f}" if row.get(key) else "-"

        print(f"| {n} | {ms('lg_t')} | {ms('dense_t')} | {fmt_ratio(row.get('ratio_t'))} | {ms('lg_f')} | {ms('dense_f')} "
              f"| {fmt_ratio(row.get('ratio_f'))} | {mib('lg_m')} | {mib('dense_m')} | {fmt_ratio(row.get('ratio_m'))} |")
    print("\n### local_global vs plain SDPA, no mask (fused kernel: memory linear in n, time quadratic)\n")
    print("| n | local_global fwd+bwd ms | plain SDPA ms | ratio | peak MiB fwd+bwd | plain SDPA MiB | ratio |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        row = res[n]
        if "plain_t" not in row:
            continue
        plain_m = f"{row['plain_m'] / MiB:.1f}" if row.get("plain_m") else "-"
        lg_m = f"{row['lg_m'] / MiB:.1f}" if row.get("lg_m") else "-"
        print(f"| {n} | {row['lg_t2'] * 1e3:.1f} | {row['plain_t'] * 1e3:.1f} | {fmt_ratio(row.get('ratio_plain_t'))} "
              f"| {lg_m} | {plain_m} | {fmt_ratio(row.get('ratio_plain_m'))} |")
    if res.get("huge"):
        hm = res["huge"]
        print(f"\nn = {HUGE_N} (b={LONG_B}, h={LONG_H}, d=64): local_global peak {hm['fwdbwd'] / MiB:.0f} MiB fwd+bwd, "
              f"{hm['fwd'] / MiB:.0f} MiB fwd")
    return res


def targets(zoo: dict, long: dict | None) -> None:
    rows = []

    def add(label: str, value: float | None, limit: float, unit: str = "x") -> None:
        if value is None:
            rows.append(f"| {label} | not measured | <= {limit:g}{unit} | - |")
            return
        verdict = "PASS" if value <= limit else "FAIL"
        rows.append(f"| {label} | {value:.2f}{unit} | <= {limit:g}{unit} | {verdict} |")

    for n in (*ZOO_SIZES, SOFT_BIAS_LONG):  # issue "Speed round 2": <= 1.3x for 128 <= n <= 1024, 1.4x at 2048
        if n >= 128 and ("soft_bias", n) in zoo:
            limit = 1.4 if n >= 2048 else 1.3
            add(f"soft_bias (learnable table) fwd+bwd time vs SDPA, n={n}", zoo[("soft_bias", n)]["time_ratio"], limit)
            add(f"soft_bias (learnable table) fwd+bwd peak memory vs SDPA, n={n}", zoo[("soft_bias", n)].get("mem_ratio"), 1.3)
    if ("ssan", 128) in zoo:
        add(f"ssan layer fwd+bwd time vs SDPA layer, n=128, b={B}", zoo[("ssan", 128)]["time_ratio"], 1.5)
    if ("ssan", "b32") in zoo:
        add("ssan layer fwd+bwd time vs SDPA layer, n=128, b=32", zoo[("ssan", "b32")]["time_ratio"], 1.5)
    if ("ssan", 512) in zoo:
        add(f"ssan layer fwd+bwd time vs SDPA layer, n=512, b={B}", zoo[("ssan", 512)]["time_ratio"], 1.8)
        add(f"ssan layer fwd+bwd peak memory vs SDPA layer, n=512, b={B}", zoo[("ssan", 512)].get("mem_ratio"), 3.0)
    if long is not None:
        ns = [n for n in long["n"] if n >= 1024]
        if len(ns) >= 2:
            add("local_global time slope (log-log, n >= 1024)", slope(ns, [long[n]["lg_t"] for n in ns]), 1.15, "")
            mems = [long[n].get("lg_m") for n in ns]
            add("local_global memory slope (log-log, n >= 1024)", slope(ns, mems) if all(mems) else None, 1.05, "")
        for n in (n for n in long["n"] if n >= 2048 and "plain_t" in long[n]):
            add(f"local_global fwd+bwd peak memory vs plain SDPA, n={n}", long[n].get("ratio_plain_m"), 1.5)
        if 8192 in long:
            add("local_global fwd+bwd time vs plain SDPA, n=8192", long[8192].get("ratio_plain_t"), 0.2)
            add("local_global fwd+bwd time vs dense masked SDPA, n=8192", long[8192].get("ratio_t"), 0.15)
            add("local_global fwd+bwd peak memory vs dense masked SDPA, n=8192", long[8192].get("ratio_m"), 0.5)
        huge = long.get("huge")
        add(f"local_global n={HUGE_N} fwd+bwd peak memory (b={LONG_B}, h={LONG_H})", None if not huge else huge["fwdbwd"] / 2**30, 4.0, " GiB")
    print("\n### Targets\n")
    print("| target | measured | limit | verdict |")
    print("|---|---|---|---|")
    print("\n".join(rows))


def soft_bias_long_row(max_reps: int, memory: bool, threads: int) -> dict:
    """``soft_bias`` (learnable table) against SDPA at n = :data:`SOFT_BIAS_LONG` (the zoo stops at 1024)."""
    spec, base_spec = Spec("zoo", "soft_bias", SOFT_BIAS_LONG, B, H), Spec("zoo", "sdpa", SOFT_BIAS_LONG, B, H)
    v_train, _ = build(spec)
    b_train, _ = build(base_spec)
    bt, vt, ratio = compare_times(b_train, v_train, max_reps)
    del v_train, b_train
    gc.collect()
    cell = {"base_t": bt, "var_t": vt, "time_ratio": ratio}
    line = f"\nsoft_bias at n={SOFT_BIAS_LONG} (b={B}): fwd+bwd {vt * 1e3:.0f} ms vs SDPA {bt * 1e3:.0f} ms ({ratio:.2f}x)"
    if memory:
        vm, bm = measure_memory([spec, base_spec], threads)
        if vm and bm:
            cell["mem_ratio"] = vm["fwdbwd"] / max(bm["fwdbwd"], 1)
            line += f", peak {vm['fwdbwd'] / MiB:.0f} MiB vs {bm['fwdbwd'] / MiB:.0f} MiB ({cell['mem_ratio']:.2f}x)"
    print(line)
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 rounds, no n=32768 run")
    parser.add_argument("--only", help="benchmark one variant")
    parser.add_argument("--reps", type=int, default=7, help="rounds per timed cell at most (default 7)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocess")
    parser.add_argument("--clock", choices=sorted(CLOCK), default="wall",
                        help="wall (default) or cpu: process CPU time, robust to other load with --threads 1")
    parser.add_argument("--floors", action="store_true",
                        help="also time soft_bias and ssan against their floors (see the module docstring)")
    parser.add_argument("--cell-seconds", type=float, default=DEFAULT_CELL_SECONDS,
                        help=f"time budget per timed cell, which sets its rounds (default {DEFAULT_CELL_SECONDS:g})")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    global _clock, CELL_SECONDS
    _clock = CLOCK[args.clock]
    if args.cell_seconds <= 0:
        parser.error(f"--cell-seconds must be positive, got {args.cell_seconds:g}")
    CELL_SECONDS = args.cell_seconds
    if args.worker:
        worker([Spec(**spec) for spec in json.loads(args.worker)])
        return
    names = attention_names()
    if args.only is not None:
        if args.only not in names:
            parser.error(f"--only {args.only!r}: not a registered variant ({', '.join(names)})")
        names = [args.only]
    reps = 2 if args.quick else args.reps
    memory = not args.no_memory
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {args.threads} threads, "
          f"{args.clock} clock, best of up to {reps} rounds; variants: {', '.join(names)}")
    started = time.perf_counter()
    zoo = zoo_table(names, ZOO_QUICK if args.quick else ZOO_SIZES, reps, memory, args.threads)
    if "ssan" in names and not args.quick:
        base_train, _ = build(Spec("zoo", "sdpa_layer", 128, 32, H))
        ssan_train, _ = build(Spec("zoo", "ssan", 128, 32, H))
        bt, vt, ratio = compare_times(base_train, ssan_train, reps)
        zoo[("ssan", "b32")] = {"time_ratio": ratio}
        print(f"\nssan layer at b=32, n=128: {vt * 1e3:.1f} ms vs SDPA layer {bt * 1e3:.1f} ms ({ratio:.2f}x)")
    if "soft_bias" in names and not args.quick:
        zoo[("soft_bias", SOFT_BIAS_LONG)] = soft_bias_long_row(reps, memory, args.threads)
    if args.floors:
        floor_table(names, ZOO_QUICK if args.quick else ZOO_SIZES, reps)
    long = None
    if "local_global" in names:
        long = long_table(LONG_QUICK if args.quick else LONG_SIZES, reps, memory, args.threads, huge=not args.quick)
    targets(zoo, long)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
