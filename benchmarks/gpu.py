"""Benchmark on a GPU: soft_bias (SDPA and flex paths) and local_global (flex block mask and chunked) against plain
fused SDPA, forward + backward.

    python benchmarks/gpu.py                                # n = 512 .. 16384, bf16, best of 3 rounds
    python benchmarks/gpu.py --sizes 1024 4096 --rounds 5   # some lengths, more rounds
    python benchmarks/gpu.py --only local_global            # one variant (both of its backends)
    python benchmarks/gpu.py --out gpu_results/gpu_bench.md # also write the table there (rewritten after each row)
    python benchmarks/gpu.py --device cpu --quick           # smoke run on CPU: n = 128, 256, float32, no flex rows

Issue "Speed round 2": "a GPU benchmark of soft_bias (flex and SDPA paths) and local_global (flex block mask and
chunked) against SDPA at n = 512..16384, bf16, forward+backward; record the figures with the GPU named."

Rows: ``soft_bias`` (default options: one learnable table shared by the heads) on one random recursive tree per
sentence through the ``dependency`` provider (a dense (b, n, n) distance), with ``backend="sdpa"`` and ``"flex"``;
``local_global`` on the ``window`` provider (radius 64, first and last token global) with ``backend="flex"`` and
``"chunked"``. Each row is timed on the attention call (structure built and moved to the device beforehand) against
``F.scaled_dot_product_attention(q, k, v)``, no mask, on the same q, k, v of shape (b, h=8, n, d=64); b = 2 up to
n = 4096 and 1 above (``--batch`` sets it): soft_bias's (b, n, n) distances and bucket codes grow as n^2.

Time: a training step of the attention (module in train mode, ``out.backward(dO)`` with a fixed random ``dO``,
into q, k, v and the table). On CUDA, ``torch.cuda.Event``s around ``calls`` back-to-back steps (sized from the
warm-up to about :data:`ROUND_SECONDS`, so that small n measure more than launch latency), per step; on CPU the
wall clock. Each round runs the baseline then the variant (interleaved); a figure is the best round, the ratio
best / best.
Warm-up: two steps of each. The first step of the variant is reported alone ("first s", synchronised wall clock):
for flex it holds the compilation of the forward and backward graphs (one graph per length, static shapes);
for soft_bias it also holds building the bucket codes, which later calls on the same structure reuse (as the
layers of one forward pass do), so the figures exclude them.

Peak memory (CUDA only): ``max_memory_allocated`` during one step after ``reset_peak_memory_stats``, minus what
was allocated before it: the extra memory of a step, gradients included, inputs, parameters and structure
excluded. A cell that runs out of memory shows OOM and the run goes on; any other error in a cell is printed
(traceback on stderr) and the run goes on too.
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attention import RADIUS, backward_fixed, structure_for  # benchmarks/attention.py: the CPU benchmark's inputs
from structattn.attention import get_attention
from structattn.structures import Structure

SIZES, QUICK_SIZES = (512, 1024, 2048, 4096, 8192, 16384), (128, 256)
H, D = 8, 64
ROWS = (("soft_bias", "sdpa"), ("soft_bias", "flex"), ("local_global", "flex"), ("local_global", "chunked"))
ROUND_SECONDS, MAX_CALLS = 0.02, 50  # steps per timed round: about this long, at most this many
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
MiB = 2**20
Step = Callable[[], None]


def batch_for(n: int) -> int:
    """b = 2 up to n = 4096, 1 above (soft_bias's dense (b, n, n) distances grow as n^2)."""
    return 2 if n <= 4096 else 1


@dataclass
class Cell:
    """One row of the table; ``note`` is ``"OOM"`` or an error instead of figures."""

    name: str
    backend: str
    n: int
    b: int
    ms: float | None = None
    base_ms: float | None = None
    mib: float | None = None
    base_mib: float | None = None
    first_s: float | None = None
    note: str = ""


# ---------------------------------------------------------------- inputs

def train_step(call: Callable[[], torch.Tensor], leaves: list[torch.Tensor], module: nn.Module | None) -> Step:
    """One forward + backward of ``call``, gradients dropped afterwards (each step allocates its own)."""

    grad: list[torch.Tensor] = []  # dO, see attention.backward_fixed

    def step() -> None:
        backward_fixed(call(), grad)
        for t in leaves:
            t.grad = None
        if module is not None:
            module.zero_grad(set_to_none=True)

    return step


# ---------------------------------------------------------------- measurement

def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall(fn: Step, device: torch.device) -> float:
    """Seconds of one call of ``fn``, the device synchronised before and after."""
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def per_call(fn: Step, calls: int, device: torch.device) -> float:
    """Seconds per call over ``calls`` back-to-back calls: CUDA events on a GPU, the wall clock on CPU."""
    if device.type != "cuda":
        return wall(lambda: [fn() for _ in range(calls)], device) / calls
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def compare(base: Step, variant: Step, rounds: int, device: torch.device) -> tuple[float, float, float]:
    """``(first call of variant, best base, best variant)`` in seconds, over interleaved rounds after warm-up."""
    first = wall(variant, device)  # flex: compiles here
    wall(base, device)
    base_calls, variant_calls = (max(1, min(MAX_CALLS, int(ROUND_SECONDS / max(wall(f, device), 1e-6))))
                                 for f in (base, variant))
    pairs = [(per_call(base, base_calls, device), per_call(variant, variant_calls, device)) for _ in range(rounds)]
    return first, min(p[0] for p in pairs), min(p[1] for p in pairs)


def peak_extra(fn: Step, device: torch.device) -> int | None:
    """Peak allocated bytes during one call above those allocated before it (CUDA only, else ``None``)."""
    if device.type != "cuda":
        return None
    gc.collect()
    sync(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    sync(device)
    return torch.cuda.max_memory_allocated(device) - before


def measure(cell: Cell, base: Step, qkv: list[torch.Tensor], structure: Structure, rounds: int,
            device: torch.device, dtype: torch.dtype) -> None:
    """Fill ``cell`` with its figures, or with ``note = "OOM"`` / the error (traceback on stderr)."""
    q, k, v = qkv
    try:
        module = get_attention(cell.name, num_heads=H, head_dim=D, backend=cell.backend).to(device, dtype).train()
        step = train_step(lambda: module(q, k, v, structure), qkv, module)
        cell.first_s, base_s, variant_s = compare(base, step, rounds, device)
        cell.base_ms, cell.ms = 1e3 * base_s, 1e3 * variant_s
        base_bytes, variant_bytes = peak_extra(base, device), peak_extra(step, device)
        if base_bytes is not None and variant_bytes is not None:
            cell.base_mib, cell.mib = base_bytes / MiB, variant_bytes / MiB
    except torch.OutOfMemoryError:
        cell.note = "OOM"
    except Exception as err:  # one failing cell (a compile error, say) must not end a one-shot GPU session
        traceback.print_exc()
        first_line = str(err).splitlines()[0][:120] if str(err) else ""
        cell.note = f"error: {type(err).__name__}: {first_line}".replace("|", "/")
    finally:
        for t in qkv:
            t.grad = None


# ---------------------------------------------------------------- table

TABLE_HEAD = ("| variant | backend | n | b | fwd+bwd ms | SDPA ms | ratio | peak MiB | SDPA MiB | ratio | first s |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")


LEGEND = (f"soft_bias: learnable table shared by the heads, random dependency trees; local_global: window radius "
          f"{RADIUS}, first and last token global. Baseline: F.scaled_dot_product_attention(q, k, v), no mask, same "
          "q, k, v. ms: one training step (forward + out.backward(dO), dO fixed random), best round; peak MiB: extra "
          "memory allocated during one step; first s: the variant's first step (flex: includes compiling).")


def _num(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"


def table_row(c: Cell) -> str:
    if c.note:
        return f"| {c.name} | {c.backend} | {c.n} | {c.b} | {c.note} | - | - | - | - | - | - |"
    return (f"| {c.name} | {c.backend} | {c.n} | {c.b} | {_num(c.ms, 2)} | {_num(c.base_ms, 2)} | {_ratio(c.ms, c.base_ms)} "
            f"| {_num(c.mib, 1)} | {_num(c.base_mib, 1)} | {_ratio(c.mib, c.base_mib)} | {_num(c.first_s, 2)} |")


def header(device: torch.device, dtype: torch.dtype, rounds: int) -> str:
    if device.type == "cuda":
        where = f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(device)}"
    else:
        where = f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    return (f"torch {torch.__version__}, {where}, {str(dtype).removeprefix('torch.')}, h={H}, d={D}, fwd+bwd, "
            f"best of {rounds} rounds, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def write_out(path: str | None, lines: list[str]) -> None:
    """Rewrite ``path`` with the table so far (a run cut short still leaves its finished rows)."""
    if path is not None:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------- main

def allow_recompiles(sizes: list[int]) -> None:
    """Flex compiles one graph per length for each variant, and dynamo counts them per code object (the shared
    ``flex_attention``): raise its limit (default 8) so that no length falls back silently to eager flex."""
    import torch._dynamo

    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, 4 * len(sizes) + 8)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", help=f"sequence lengths n (default {' '.join(map(str, SIZES))})")
    parser.add_argument("--batch", type=int, help="b for every n (default: 2 up to n = 4096, 1 above)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), help="default bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per cell (default 3)")
    parser.add_argument("--only", choices=sorted({name for name, _ in ROWS}), help="one variant (both of its backends)")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu (smoke run)")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: n = {QUICK_SIZES}, 2 rounds")
    parser.add_argument("--out", help="also write the markdown table to this file")
    args = parser.parse_args()
    if any(n < 2 for n in args.sizes or ()) or (args.batch is not None and args.batch < 1) or args.rounds < 1:
        parser.error(f"need --sizes >= 2, --batch >= 1 and --rounds >= 1, got --sizes {args.sizes}, "
                     f"--batch {args.batch}, --rounds {args.rounds}")
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        parser.exit(2, f"gpu.py: no CUDA device is visible (torch {torch.__version__}, CUDA build {torch.version.cuda}); "
                       "for the CPU smoke run: PYTHONPATH=. python benchmarks/gpu.py --device cpu --quick\n")
    return args


def plan_rows(only: str | None, device: torch.device) -> tuple[list[tuple[str, str]], list[str]]:
    """The ``(variant, backend)`` rows to run and the notes on those left out."""
    rows = [r for r in ROWS if only in (None, r[0])]
    if device.type == "cuda" or all(backend != "flex" for _, backend in rows):
        return rows, []
    note = ("flex rows skipped on CPU: FlexAttention has no CPU backward (the library refuses CPU training with "
            "backend='flex'); they run on CUDA")
    return [r for r in rows if r[1] != "flex"], [note]


def run_size(n: int, b: int, rows: list[tuple[str, str]], rounds: int, device: torch.device,
             dtype: torch.dtype) -> Iterator[Cell]:
    """Every row at length ``n``, each against SDPA on the same q, k, v: the cells, as they finish."""
    built = time.perf_counter()
    gen = torch.Generator().manual_seed(n)
    structs = {name: structure_for(name, b, n, gen).to(device) for name in dict.fromkeys(name for name, _ in rows)}
    qkv = [torch.randn(b, H, n, D, generator=gen).to(device, dtype).requires_grad_() for _ in range(3)]
    print(f"  n={n} b={b}: structures in {time.perf_counter() - built:.1f} s", file=sys.stderr, flush=True)
    base = train_step(lambda: F.scaled_dot_product_attention(*qkv), qkv, None)
    for name, backend in rows:
        cell = Cell(name, backend, n, b)
        measure(cell, base, qkv, structs[name], rounds, device, dtype)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        yield cell


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype] if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float32)
    sizes = args.sizes or list(QUICK_SIZES if args.quick else SIZES)
    rounds = 2 if args.quick else args.rounds
    rows, notes = plan_rows(args.only, device)
    if any(backend == "flex" for _, backend in rows):
        allow_recompiles(sizes)
    lines = [header(device, dtype, rounds), LEGEND, "", TABLE_HEAD]
    print("\n".join([*lines[:2], *notes, *lines[2:]]), flush=True)
    started = time.perf_counter()
    for n in sizes:
        for cell in run_size(n, args.batch or batch_for(n), rows, rounds, device, dtype):
            lines.append(table_row(cell))
            print(lines[-1], flush=True)
            write_out(args.out, [*lines, "", *notes])
    lines += ["", *notes, f"(total {time.perf_counter() - started:.0f} s)"]
    write_out(args.out, lines)
    print(f"\n{lines[-1]}")


if __name__ == "__main__":
    main()
