#!/usr/bin/env bash
# Run the compute plan's long Multi30k runs (docs/compute_plan.md), session by session, one lane per core.
#   scripts/run_plan.sh LANE STOP_AT      e.g.  scripts/run_plan.sh a 23:45
# LANE is a or b (start both, in the background, one thread each); STOP_AT is a wall-clock time (`date -d`
# syntax) by which every run of the lane has saved its checkpoint and stopped (compare --time-limit). A lane
# works through its items in order: a finished item (its folder holds .plan_done) is skipped, a stopped one is
# continued with --resume. Needs STRUCTATTN_MULTI30K. Outputs go to runs/plan/<item>/ (a shard item to
# runs/plan/<item>/shard-k-of-N/), logs beside them; keep each finished folder with
# `structattn keep runs/plan/<item> results/plan/<item>` (a shard: keep its shard folder into
# results/plan/<item>/shard-k-of-N) and commit it; `structattn keep --partial` keeps the finished runs of one
# still training.
set -uo pipefail
lane=${1:?usage: run_plan.sh LANE STOP_AT}
stop_at=$(date -d "${2:?usage: run_plan.sh LANE STOP_AT}" +%s) || exit 2
: "${STRUCTATTN_MULTI30K:?set STRUCTATTN_MULTI30K to the Multi30k folder}"
cd "$(dirname "$0")/.."
mkdir -p runs/plan

# item | config | gin bindings (';'-separated) | shard k/N (empty: the whole config)
# Batch 1 ((a) at 29k: full and soft_bias, seeds 0-2; run index = seed + 3 * setting): each setting at the rate
# batch 0's dev picked: full at the shared budget's 1e-3 (31.90 vs 31.06), soft_bias at 2e-3 (31.29 vs 31.11).
# The binding is the same in every shard item, so that the shards merge (one fingerprint).
# Lane b also runs issue #34's precision check after its first 29k run: the quick config (2 settings, 600 steps,
# about 50 min of one core for both) in fp32 and in bf16, paired run by run by scripts/precision_check.py
# (keep them into results/precision_quick/fp32 and .../bf16).
items_a=(
  "tune_lr0.001|configs/experiments/multi30k_lr_tuning.gin|training.lr = 1e-3|"
  "a|configs/experiments/multi30k_priors.gin|compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}|0/12"
  "a|configs/experiments/multi30k_priors.gin|compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}|1/12"
  "a|configs/experiments/multi30k_priors.gin|compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}|2/12"
)
items_b=(
  "tune_lr0.002|configs/experiments/multi30k_lr_tuning.gin|training.lr = 2e-3|"
  "a|configs/experiments/multi30k_priors.gin|compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}|3/12"
  "quick_fp32|configs/experiments/multi30k_quick.gin|training.precision = 'fp32'|"
  "quick_bf16|configs/experiments/multi30k_quick.gin|training.precision = 'bf16'|"
  "a|configs/experiments/multi30k_priors.gin|compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}|4/12"
  "a|configs/experiments/multi30k_priors.gin|compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}|5/12"
)
declare -n items="items_${lane}" 2>/dev/null || { echo "no lane '$lane' (a or b)" >&2; exit 2; }

for item in "${items[@]}"; do
  IFS='|' read -r name config bindings shard <<<"$item"
  out="runs/plan/$name"
  folder="$out"
  if [[ -n "$shard" ]]; then folder="$out/shard-${shard%/*}-of-${shard#*/}"; fi
  label="$name${shard:+ shard $shard}"
  [[ -e "$folder/.plan_done" ]] && continue
  left=$(( stop_at - $(date +%s) ))
  if (( left < 600 )); then echo "[$lane] stop time reached; $label not started" >&2; exit 3; fi
  args=(compare "$config" --out "$out" --threads 1 --quiet --time-limit "${left}s")
  [[ -n "$shard" ]] && args+=(--shard "$shard")
  [[ -e "$folder/comparison.json" ]] && args+=(--resume)
  IFS=';' read -ra binds <<<"$bindings"
  for b in "${binds[@]}"; do args+=(--gin-param "$b"); done
  log="runs/plan/$name${shard:+-${shard%/*}}.log"
  echo "[$lane] $(date -u +%FT%TZ) structattn ${args[*]}" >>"$log"
  python -m structattn.cli "${args[@]}" >>"$log" 2>&1
  rc=$?
  if (( rc == 0 )); then mkdir -p "$folder" && touch "$folder/.plan_done"; echo "[$lane] $label finished" >&2
  else echo "[$lane] $label stopped (exit $rc); see $log" >&2; exit "$rc"; fi
done
