#!/usr/bin/env bash
# One command for a session lent a GPU machine: the CUDA tests, then the GPU benchmark, everything in one folder.
#
#     bash scripts/gpu_check.sh [OUTDIR] [gpu.py options...]   # from the repository root
#     bash scripts/gpu_check.sh "$OUT" --sizes 1024 4096        # fewer lengths
#     GPU_BENCH_SIZES="512 2048 8192" bash scripts/gpu_check.sh  # the same through the environment
#
# Expects an environment where the package and its test extra are installed (`pip install -e .[test]`, torch with
# CUDA and triton): it installs nothing, since the GPU machine has no internet, and stops at once when
# `import structattn, torch` fails. OUTDIR defaults to $OUT when set, else gpu_results. It writes:
#   env.txt          nvidia-smi (when present), python, torch, CUDA, GPU name, git commit
#   cuda_tests.txt   python -m pytest tests/attention -q -rs -p no:cacheprovider (the gpu-marked tests run on CUDA,
#                    the rest as on CPU); a failure is recorded and the benchmark still runs
#   gpu_bench.md     the benchmark table (rewritten after each row: a run cut short keeps its finished rows)
#   gpu_bench.txt    the benchmark's console output (progress, tracebacks of failed cells)
#   multi30k/        Multi30k comparison (a) (configs/experiments/multi30k_priors.gin) for seed 0 with
#                    training.precision = 'bf16' on the GPU, when the corpus is found ($STRUCTATTN_MULTI30K, else
#                    shared/data/multi30k or ../shared/data/multi30k); resumable (--resume), so a second call
#                    continues it; multi30k.txt is its console output and the wall time goes to summary.txt
#   summary.txt      the exit codes and wall times
# Steps: GPU_CHECK_STEPS (default "tests bench multi30k"; a device call has at most 10 minutes, so run
# GPU_CHECK_STEPS="tests bench" first and GPU_CHECK_STEPS=multi30k after). Time: tests + benchmark about 8 minutes
# on an H200. Each step has a time limit (seconds; 124 = cut short): GPU_CHECK_TEST_TIMEOUT (default 180),
# GPU_CHECK_BENCH_TIMEOUT (default 270) and GPU_CHECK_M30K_TIMEOUT (default 540). Extra pytest arguments go in
# GPU_CHECK_PYTEST_ARGS (e.g. "-m gpu" for the CUDA tests alone). Exit status 0 when every step run passed (a
# Multi30k step cut short by its limit counts as passed: it resumes), else 1.
set -euo pipefail

outdir="${1:-${OUT:-gpu_results}}"
if [[ $# -gt 0 ]]; then shift; fi
bench_args=("$@")
if [[ -n "${GPU_BENCH_SIZES:-}" ]]; then
    read -r -a sizes <<< "$GPU_BENCH_SIZES"
    bench_args=(--sizes "${sizes[@]}" "${bench_args[@]}")
fi
read -r -a pytest_extra <<< "${GPU_CHECK_PYTEST_ARGS:-}"
test_timeout="${GPU_CHECK_TEST_TIMEOUT:-180}"
bench_timeout="${GPU_CHECK_BENCH_TIMEOUT:-270}"
m30k_timeout="${GPU_CHECK_M30K_TIMEOUT:-540}"
steps=" ${GPU_CHECK_STEPS:-tests bench multi30k} "
for step in $steps; do
    case "$step" in tests|bench|multi30k) ;; *) echo "gpu_check: unknown step '$step' in GPU_CHECK_STEPS (tests, bench, multi30k)" >&2; exit 3 ;; esac
done

if [[ ! -f pyproject.toml || ! -d structattn ]]; then
    echo "gpu_check: run from the repository root (no pyproject.toml and structattn/ in $PWD)" >&2
    exit 3
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the working tree's structattn, installed or not
export PYTHONUNBUFFERED=1  # output reaches tee as it comes, and survives a timeout
if ! import_error=$(python -c "import structattn, torch" 2>&1); then
    echo "gpu_check: 'import structattn, torch' failed; this script installs nothing (no internet there)." >&2
    echo "  Set up the environment first: pip install -e .[test] (with a CUDA build of torch). The error:" >&2
    tail -n 3 <<< "$import_error" >&2
    exit 3
fi
mkdir -p "$outdir"
started=$SECONDS

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $(git rev-parse HEAD 2> /dev/null || echo unknown)"
    if command -v nvidia-smi > /dev/null; then nvidia-smi || true; else echo "nvidia-smi: not found"; fi
    python - << 'EOF' || true
import importlib.metadata as md
import platform

import torch

print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA build {torch.version.cuda}, "
      f"cuDNN {torch.backends.cudnn.version()}")
for name in ("triton", "pytest"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
print(f"cuda available: {torch.cuda.is_available()}, devices: {torch.cuda.device_count()}")
for i in range(torch.cuda.device_count()):
    props = torch.cuda.get_device_properties(i)
    print(f"  cuda:{i} {props.name}, {props.total_memory / 2**30:.0f} GiB, capability {props.major}.{props.minor}")
EOF
} 2>&1 | tee "$outdir/env.txt"

tests_rc=0
bench_rc=0
m30k_rc=0
m30k_note="not run"
if [[ "$steps" == *" tests "* ]]; then
echo "== CUDA tests (limit ${test_timeout} s)"
if python -c "import pytest" 2> /dev/null; then
    timeout -k 10 "$test_timeout" python -m pytest tests/attention -q -rs -p no:cacheprovider "${pytest_extra[@]}" \
        2>&1 | tee "$outdir/cuda_tests.txt" || tests_rc=$?
else
    echo "pytest is not installed: tests not run (pip install -e .[test])" | tee "$outdir/cuda_tests.txt"
    tests_rc=127
fi

fi

if [[ "$steps" == *" bench "* ]]; then
echo "== GPU benchmark (limit ${bench_timeout} s)"
timeout -k 10 "$bench_timeout" python benchmarks/gpu.py --out "$outdir/gpu_bench.md" "${bench_args[@]}" \
    2>&1 | tee "$outdir/gpu_bench.txt" || bench_rc=$?
fi

if [[ "$steps" == *" multi30k "* ]]; then
corpus="${STRUCTATTN_MULTI30K:-}"
for candidate in shared/data/multi30k ../shared/data/multi30k; do
    if [[ -z "$corpus" && -d "$candidate" ]]; then corpus="$(cd "$candidate" && pwd)"; fi
done
if [[ -z "$corpus" ]]; then
    m30k_note="skipped: no Multi30k corpus (set STRUCTATTN_MULTI30K)"
    echo "== Multi30k: $m30k_note"
else
    echo "== Multi30k comparison (a), seed 0, bf16 (limit ${m30k_timeout} s; corpus $corpus)"
    m30k_started=$SECONDS
    resume=()
    if [[ -d "$outdir/multi30k" ]]; then resume=(--resume); fi
    STRUCTATTN_MULTI30K="$corpus" timeout -k 10 "$m30k_timeout" python -m structattn.cli compare \
        configs/experiments/multi30k_priors.gin --out "$outdir/multi30k" "${resume[@]}" --no-plots \
        --gin-param "compare.seeds = [0]" --gin-param "training.precision = 'bf16'" \
        2>&1 | tee -a "$outdir/multi30k.txt" || m30k_rc=$?
    m30k_note="exit ${m30k_rc} after $((SECONDS - m30k_started)) s wall (0 finished: results.md; 124 cut short, resumes)"
fi
fi

{
    echo "steps:${steps% }"
    echo "tests: exit ${tests_rc} (0 passed or not run, 1 failures, 124 cut short at ${test_timeout} s, 127 no pytest)"
    echo "benchmark: exit ${bench_rc} (0 done or not run, 2 no CUDA device, 124 cut short at ${bench_timeout} s)"
    echo "multi30k: ${m30k_note}"
    echo "total: $((SECONDS - started)) s; results in $outdir"
} | tee -a "$outdir/summary.txt"
[[ $tests_rc -eq 0 && $bench_rc -eq 0 && ( $m30k_rc -eq 0 || $m30k_rc -eq 124 ) ]]
