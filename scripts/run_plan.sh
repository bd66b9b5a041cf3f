#!/usr/bin/env bash
# Run the compute plan's long Multi30k runs (docs/compute_plan.md), session by session, one lane per core.
#   scripts/run_plan.sh LANE STOP_AT      e.g.  scripts/run_plan.sh a 23:45
# LANE is a or b (start both, in the background, one thread each); STOP_AT is a wall-clock time (`date -d`
# syntax) by which every run of the lane has saved its checkpoint and stopped (compare --time-limit). A lane
# works through its items in order: a finished item (its folder holds .plan_done) is skipped, a stopped one is
# continued with --resume. Needs STRUCTATTN_MULTI30K. Outputs go to runs/plan/<item>/, logs beside them;
# keep each finished folder with `structattn keep runs/plan/<item> results/plan/<item>` and commit it.
set -uo pipefail
lane=${1:?usage: run_plan.sh LANE STOP_AT}
stop_at=$(date -d "${2:?usage: run_plan.sh LANE STOP_AT}" +%s) || exit 2
: "${STRUCTATTN_MULTI30K:?set STRUCTATTN_MULTI30K to the Multi30k folder}"
cd "$(dirname "$0")/.."
mkdir -p runs/plan

# item | config | gin bindings (';'-separated)
items_a=(
  "tune_lr0.001|configs/experiments/multi30k_lr_tuning.gin|training.lr = 1e-3"
)
items_b=(
  "tune_lr0.002|configs/experiments/multi30k_lr_tuning.gin|training.lr = 2e-3"
)
declare -n items="items_${lane}" 2>/dev/null || { echo "no lane '$lane' (a or b)" >&2; exit 2; }

for item in "${items[@]}"; do
  IFS='|' read -r name config bindings <<<"$item"
  out="runs/plan/$name"
  [[ -e "$out/.plan_done" ]] && continue
  left=$(( stop_at - $(date +%s) ))
  if (( left < 600 )); then echo "[$lane] stop time reached; $name not started" >&2; exit 3; fi
  args=(compare "$config" --out "$out" --threads 1 --quiet --time-limit "${left}s")
  [[ -e "$out" ]] && args+=(--resume)
  IFS=';' read -ra binds <<<"$bindings"
  for b in "${binds[@]}"; do args+=(--gin-param "$b"); done
  echo "[$lane] $(date -u +%FT%TZ) structattn ${args[*]}" >>"runs/plan/$name.log"
  python -m structattn.cli "${args[@]}" >>"runs/plan/$name.log" 2>&1
  rc=$?
  if (( rc == 0 )); then touch "$out/.plan_done"; echo "[$lane] $name finished" >&2
  else echo "[$lane] $name stopped (exit $rc); see runs/plan/$name.log" >&2; exit "$rc"; fi
done
