#!/usr/bin/env bash
# Run the compute plan's long Multi30k runs (docs/compute_plan.md), session by session, one lane per core.
#   scripts/run_plan.sh LANE STOP_AT [LAST_START]   e.g.  scripts/run_plan.sh a 23:45 22:30
#   scripts/run_plan.sh status [REPO]     where every item of both lanes stands: kept (under REPO's results/, default
#                                         this checkout's), finished and not kept yet (with the keep command to run),
#                                         started (its last dev check, its checkpoint), not started
# LANE is a or b (start both, in the background, one thread each); STOP_AT is a wall-clock time (`date -d`
# syntax; a bare HH:MM already past means that time tomorrow) by which every run of the lane has saved its
# checkpoint and stopped (compare --time-limit). LAST_START (same syntax, before STOP_AT) is the latest time a
# lane begins an item it has not started: after it, a finished run leaves its core idle for the session's end
# work rather than start a run the stop time cuts half-way (a replaced machine loses that half); an item already
# started still resumes. A lane works through its items in order: a finished item (its folder holds .plan_done,
# or it is kept under results/) is skipped, a stopped one is continued with --resume.
# Needs STRUCTATTN_MULTI30K. Outputs go to runs/plan/<item>/ (a shard item to runs/plan/<item>/shard-k-of-N/),
# logs beside them; keep each finished folder with
# `structattn keep runs/plan/<item> results/plan/<item>` (a shard: keep its shard folder into
# results/plan/<item>/shard-k-of-N) and commit it; `structattn keep --partial` keeps the finished runs of one
# still training.
set -uo pipefail
usage="usage: run_plan.sh LANE STOP_AT [LAST_START], or run_plan.sh status"
lane=${1:?$usage}
case "$lane" in a|b|status) ;; *) echo "no lane '$lane' (a or b)" >&2; exit 2;; esac
# Seconds since the epoch of a `date -d` time; a bare clock time already past today means that time tomorrow (a
# session that runs past midnight).
epoch() { local t; t=$(date -d "$1" +%s) || return 2
  if (( t <= $(date +%s) )) && [[ "$1" =~ ^[0-9]{1,2}:[0-9]{2}$ ]]; then t=$(date -d "tomorrow $1" +%s) || return 2; fi
  echo "$t"; }
shown() { date -d "@$1" '+%F %T %Z'; }
if [[ "$lane" != status ]]; then
  stop_at=$(epoch "${2:?$usage}") || exit 2
  # Any other past stop time is refused rather than read as 'stop at once'.
  if (( stop_at <= $(date +%s) )); then echo "stop time '$2' ($(shown "$stop_at")) is in the past" >&2; exit 2; fi
  last_start=$stop_at
  if [[ -n "${3:-}" ]]; then
    last_start=$(epoch "$3") || exit 2
    if (( last_start > stop_at )); then
      echo "last start '$3' ($(shown "$last_start")) comes after the stop time ($(shown "$stop_at"))" >&2; exit 2; fi
  fi
  echo "[$lane] stops by $(shown "$stop_at")$( (( last_start < stop_at )) && \
    echo "; starts no new item after $(shown "$last_start")")" >&2
  : "${STRUCTATTN_MULTI30K:?set STRUCTATTN_MULTI30K to the Multi30k folder}"
fi
cd "$(dirname "$0")/.."

# item | config | gin bindings (';'-separated) | shard k/N (empty: the whole config) | reuse folders (';'-separated)
# A reuse folder that exists is passed as --reuse: (c)'s soft_bias runs on spaCy's trees are (b)'s soft_bias runs
# at 10k pairs (the same task spec, plan, seed and setup, so the same run key), copied instead of trained again
# once (b) has them (lane b runs them before lane a reaches (c)).
# A shard's run index k counts seeds fastest, then settings, then tasks (the config's order). Every setting runs at
# the rate batch 0's dev picked: soft_bias at 2e-3 (31.29 vs 31.11), every other setting at the shared budget's 1e-3
# (full's pick: 31.90 vs 31.06; hard_mask, ssan and fixed_decay were not tuned and share it). A config's binding is
# the same in each of its shard items, so that the shards merge (one fingerprint).
# Lane b also runs issue #34's precision check after its first 29k run: the quick config (2 settings, 600 steps,
# about 50 min of one core for both) in fp32 and in bf16, paired run by run by scripts/precision_check.py
# (keep them into results/precision_quick/fp32 and .../bf16).
soft_lr="compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}"
a="a|configs/experiments/multi30k_priors.gin|$soft_lr"            # (a) 29k: full, soft_bias, hard_mask, ssan
b="b|configs/experiments/multi30k_low_resource.gin|$soft_lr"      # (b) 3k, 10k: full, soft_bias, fixed_decay
c="c|configs/experiments/multi30k_parser_noise.gin|$soft_lr"      # (c) spaCy, 20% wrong: soft_bias, hard_mask
shards() { local item=$1 n=$2; shift 2; for k in "$@"; do echo "$item|$k/$n|${reuse:-}"; done; }
# Batch 0 (tuning), batch 1 ((a): full in lane a, soft_bias in lane b, seeds 0-2), batch 2 ((a): hard_mask in lane a,
# ssan in lane b), batch 3 ((b): full and soft_bias at 3k, then at 10k, side by side; then fixed_decay), batch 4
# ((c): soft_bias in lane a, hard_mask in lane b, spaCy's trees first; lane a, whose (c) soft_bias runs on spaCy's
# trees are (b)'s reused, also takes hard_mask's last two seeds on 20%-wrong trees, so that the lanes end within a
# run of each other). docs/compute_plan.md gives the costs.
mapfile -t items_a < <(
  echo "tune_lr0.001|configs/experiments/multi30k_lr_tuning.gin|training.lr = 1e-3|"
  shards "$a" 12 0 1 2 6 7 8
  shards "$b" 18 0 1 2 9 10 11 6 7 8
  reuse="runs/plan/b;results/plan/b" shards "$c" 12 0 1 2 6 7 8 10 11
)
mapfile -t items_b < <(
  echo "tune_lr0.002|configs/experiments/multi30k_lr_tuning.gin|training.lr = 2e-3|"
  shards "$a" 12 3
  echo "quick_fp32|configs/experiments/multi30k_quick.gin|training.precision = 'fp32'|"
  echo "quick_bf16|configs/experiments/multi30k_quick.gin|training.precision = 'bf16'|"
  shards "$a" 12 4 5 9 10 11
  shards "$b" 18 3 4 5 12 13 14 15 16 17
  reuse="runs/plan/b;results/plan/b" shards "$c" 12 3 4 5 9
)

# Where item $1 (name|config|bindings|shard|reuse) runs, and where `structattn keep` puts it.
folder_of() { local name config bindings shard reuse; IFS='|' read -r name config bindings shard reuse <<<"$1"
  echo "runs/plan/$name${shard:+/shard-${shard%/*}-of-${shard#*/}}"; }
kept_in() { local folder; folder=$(folder_of "$1")
  case "$folder" in runs/plan/quick_*) echo "results/precision_quick/${folder#runs/plan/quick_}";;
                    *) echo "results/${folder#runs/}";; esac; }

if [[ "$lane" == status ]]; then
  repo=${2:-.}
  [[ -d "$repo" ]] || { echo "no folder '$repo' (the checkout whose results/ holds the kept runs)" >&2; exit 2; }
  here=; [[ "$repo" != . ]] && here="$PWD/"
  for l in a b; do
    declare -n these="items_$l"
    counts=(0 0 0 0)  # kept, finished and not kept, started, not started
    for item in "${these[@]}"; do
      IFS='|' read -r name config bindings shard reuse <<<"$item"
      folder=$(folder_of "$item"); dest="${repo%/}/$(kept_in "$item")"; dest=${dest#./}
      label=$(printf '%-18s' "$name${shard:+ $shard}")
      if [[ -e "$dest/provenance.json" ]]; then
        echo "[$l] $label kept in $dest"; counts[0]=$(( counts[0] + 1 ))
      elif [[ -e "$folder/.plan_done" ]]; then
        echo "[$l] $label finished, not kept yet: structattn keep $here$folder $dest"; counts[1]=$(( counts[1] + 1 ))
      elif [[ -e "$folder/comparison.json" ]]; then
        row=$(cat "$folder"/runs/*/log.jsonl 2>/dev/null | grep '"step"' | tail -1)
        step=$(grep -o '"step": [0-9]*' <<<"$row" | grep -o '[0-9]*$')
        score=$(grep -o '"dev_score": [0-9.]*' <<<"$row" | grep -o '[0-9.]*$')
        hours=$(grep -o '"elapsed_s": [0-9.]*' <<<"$row" | grep -o '[0-9.]*$')
        saved=$(ls "$folder"/runs/*/checkpoints/last.pt 2>/dev/null | head -1)
        if [[ -n "$step" ]]; then
          step="last dev check at step $step${score:+ (dev $(printf '%.2f' "$score")${hours:+, $(awk -v s="$hours" \
            'BEGIN { printf "%.2f", s / 3600 }') h of training})}"
        else step="no dev check yet"; fi
        if [[ -n "$saved" ]]; then saved="resumes from $saved"; else saved="no checkpoint yet (restarts)"; fi
        echo "[$l] $label started: $step; $saved"
        counts[2]=$(( counts[2] + 1 ))
      else
        echo "[$l] $label not started"; counts[3]=$(( counts[3] + 1 ))
      fi
    done
    echo "lane $l: ${counts[0]} kept, ${counts[1]} finished and not kept, ${counts[2]} started, ${counts[3]} not started"
    unset -n these
  done
  exit 0
fi

mkdir -p runs/plan
declare -n items="items_${lane}"

for item in "${items[@]}"; do
  IFS='|' read -r name config bindings shard reuse <<<"$item"
  out="runs/plan/$name"
  folder=$(folder_of "$item")
  label="$name${shard:+ shard $shard}"
  [[ -e "$folder/.plan_done" ]] && continue
  kept=$(kept_in "$item")  # kept and committed (a fresh clone of main on a new machine): never trained again
  if [[ -e "$kept/provenance.json" ]]; then echo "[$lane] $label kept in $kept" >&2; continue; fi
  left=$(( stop_at - $(date +%s) ))
  if (( left < 600 )); then echo "[$lane] stop time reached; $label not started" >&2; exit 3; fi
  started=; [[ -e "$folder/comparison.json" ]] && started=1
  if [[ -z "$started" ]] && (( $(date +%s) > last_start )); then
    echo "[$lane] last start time passed; $label not started" >&2; exit 3; fi
  args=(compare "$config" --out "$out" --threads 1 --quiet --time-limit "${left}s")
  [[ -n "$shard" ]] && args+=(--shard "$shard")
  [[ -n "$started" ]] && args+=(--resume)
  IFS=';' read -ra binds <<<"$bindings"
  for b in "${binds[@]}"; do args+=(--gin-param "$b"); done
  IFS=';' read -ra reuses <<<"${reuse:-}"
  for r in "${reuses[@]}"; do [[ -d "$r" ]] && args+=(--reuse "$r"); done
  log="runs/plan/$name${shard:+-${shard%/*}}.log"
  echo "[$lane] $(date -u +%FT%TZ) structattn ${args[*]}" >>"$log"
  python -m structattn.cli "${args[@]}" >>"$log" 2>&1
  rc=$?
  if (( rc == 0 )); then mkdir -p "$folder" && touch "$folder/.plan_done"; echo "[$lane] $label finished" >&2
  else echo "[$lane] $label stopped (exit $rc); see $log" >&2; exit "$rc"; fi
done
