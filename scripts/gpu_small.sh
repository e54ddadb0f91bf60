#!/usr/bin/env bash
# The `small` scale on one H100/H200: train every run (Table 2 systems and ablations x 3 seeds, the depth
# systems x 2, Baseline/Balanced/CAN x 2 seeds on five more Multi30k directions, the models of the beyond
# studies: budget (1x, 2x), distillation, CAN on 6/6, and the next experiments at 2x: distillation from the
# 2x Balanced, the two 12/2 hybrids, CAN keeping its attention residual; at 1x, Balanced and CAN scored with their
# last checkpoint alone), evaluate them with beam 4,
# run the studies on the trained models, check that sacreBLEU recomputed from the stored hypotheses equals
# the stored scores, and pack book/results/small/ into ONE archive for the repository.
#
#   bash scripts/gpu_small.sh             # on the GPU machine: results in book/results/small, $OUT/small.tar.gz
#   bash scripts/gpu_small.sh --dry-run   # on a CPU: tiny models, 4 updates, three systems; checks the script end to end
#
# Needs no network: the device's python3 and torch, canlib from this checkout, the Multi30k folders in
# $CANLIB_DATA_DIR (default .gpu_data/, a git-ignored copy of ../shared/data/multi30k-*), and sacremoses
# as a wheel in .whl/ when the device's python lacks it. Prepare the checkout first (then copy it to the GPU machine):
#   mkdir -p .gpu_data && cp -r DATA/multi30k-* .gpu_data/
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl sacremoses
set -u

# shellcheck source=scripts/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh" "$@"  # DRY, ROOT (the working folder), PY, OUT; the environment every run reads
LOG="$OUT/small.log"

if [ "$DRY" = 1 ]; then
  RESULTS="$OUT/dry"
  WHERE=(--scale tiny --max-steps 4 --out "$RESULTS")
  RUN=("${WHERE[@]}" --systems baseline,balanced,can --jobs 2)
  REST=(--seeds 1,2)
  BEYOND_SEEDS=(--seeds 1)
  LIMIT=600
else
  RESULTS="$ROOT/book/results"
  WHERE=(--scale small)
  RUN=("${WHERE[@]}" ${JOBS:+--jobs "$JOBS"})  # default: one process per CPU core as GPU memory allows (repro.experiments.pool)
  REST=()
  BEYOND_SEEDS=()
  LIMIT="${LIMIT:-540}"
fi
SCALE_DIR="$RESULTS/$([ "$DRY" = 1 ] && echo tiny || echo small)"

{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; date -u; git rev-parse HEAD 2>/dev/null; } > "$LOG"
# CUDA MPS where the device allows: the concurrent runs' kernels overlap instead of taking turns (scripts/mps.sh)
. "$ROOT/scripts/mps.sh"
trap mps_stop EXIT
mps_start
echo "MPS: $MPS_STATE" | tee -a "$LOG"
START=$(date +%s)
# every `python -m repro experiment` below starts a run only if it can finish before START + LIMIT (the rest waits for the
# next call; repro.experiments.pool), and a run the timeout stops anyway resumes from its checkpoints
export CANLIB_DEADLINE=$(( START + LIMIT ))
# 1. Seed 1 of every system on the main corpus and the analyses that only read them: the most valuable part
#    first (each chapter switches to small as soon as its own runs are stored). The conversion study trains
#    runs of its own, so it waits for phase 2, after the other seeds that the verdicts need. The approximations
#    study reads the seed-1 Balanced only and runs in float64 on the host's CPU: about half a minute at small
#    (27 s for 100 validation sentences on a 2-core CPU with d=256 weights), so under a GPU-minute.
timeout "$LIMIT" "$PY" -m repro experiment "${RUN[@]}" --seeds 1 --corpora multi30k-en-de \
  --studies runs,similarity,similarity-balanced,errors,attention,approximations 2>&1 | tee -a "$LOG"
echo "experiment (seed 1, main corpus): exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" | tee -a "$LOG"
# 2-5. The rest in the time left, by value (stored runs are skipped, interrupted ones resume): the missing
#    seeds of the main systems (the verdicts need them; with seed 1 of everything stored, that is seed 2 of the
#    depth systems 9/4 and 14/1: two runs of 1,200 updates, about 3 GPU-minutes side by side on one H100 at the
#    170-191 s a run the stored ones took, which gives the 14/1 claim its seed interval), then the beyond studies (budget, distillation,
#    CAN on 6/6: the "beyond" chapter), then the next experiments that would sharpen its answer (their
#    GPU-minutes printed first, from the rate the stored 2x runs measured), then the five further directions
#    and the conversion study.
phase() {  # phase NAME ARGS...: one `python -m repro experiment` call in the time left
  local name="$1"; shift
  local left=$(( LIMIT - ($(date +%s) - START) ))
  if [ "$left" -gt 30 ]; then
    timeout "$left" "$PY" -m repro experiment "${RUN[@]}" "$@" 2>&1 | tee -a "$LOG"
    echo "experiment ($name): exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" | tee -a "$LOG"
  else
    echo "experiment ($name): not started, ${left} s left of ${LIMIT} s; run this script again to go on" | tee -a "$LOG"
  fi
}
phase "main corpus, every seed" "${REST[@]}" --corpora multi30k-en-de --studies runs
phase "beyond studies" "${BEYOND_SEEDS[@]}" --corpora multi30k-en-de --studies budget,distill,can-6-6
"$PY" -m repro estimate "${WHERE[@]}" "${BEYOND_SEEDS[@]}" --studies distill-x2,hybrid,can-residual,averaging 2>&1 | tee -a "$LOG"
phase "next experiments" "${BEYOND_SEEDS[@]}" --corpora multi30k-en-de --studies distill-x2,hybrid,can-residual,averaging
phase "whole plan" "${REST[@]}" --studies runs,similarity,similarity-balanced,errors,attention,approximations,conversion
timeout 120 "$PY" -m repro rescore "$SCALE_DIR" 2>&1 | tee -a "$LOG"
echo "rescore: exit ${PIPESTATUS[0]}" | tee -a "$LOG"
# the runs stored by this call: the plan's, and the beyond studies' models (named with their study in brackets)
ALL_RUNS=$(grep -cE '^\[[0-9]+/[0-9]+\] .*: test sacreBLEU' "$LOG")
BEYOND_RUNS=$(grep -cE '^\[[0-9]+/[0-9]+\] .*\): test sacreBLEU' "$LOG")
PLAN_RUNS=$(( ALL_RUNS - BEYOND_RUNS ))
ELAPSED=$(( $(date +%s) - START ))
echo "throughput: $(( PLAN_RUNS + BEYOND_RUNS )) runs ($PLAN_RUNS of the plan, $BEYOND_RUNS of the beyond studies) trained \
and evaluated in $ELAPSED s: $(awk -v n="$(( PLAN_RUNS + BEYOND_RUNS ))" -v s="$ELAPSED" \
  'BEGIN { printf "%.2f", (s > 0 ? 60 * n / s : 0) }') runs per minute" | tee -a "$LOG"
# the plan's cost from this call's rate, an estimate: the plan's runs and the beyond studies' models in runs of the
# 1x budget's updates (a 4x model counts 4), at the 2x budget twice as many (evaluation counted twice: an upper bound)
PLAN_SIZE=$("$PY" -c "from repro.experiments.run import budget, plan; from repro.experiments.beyond import study_runs; from repro.results.studies import STUDIES; from repro.results.layout import Where
small = Where.of('small')
print(round(len(plan(small)) + sum(r.steps for s in STUDIES for r in study_runs(s, small)) / budget('small')['max_steps']))" 2>/dev/null)
DONE=$(( PLAN_RUNS + BEYOND_RUNS ))
if [ -n "$PLAN_SIZE" ] && [ "$DONE" -gt 0 ]; then
  awk -v n="$PLAN_SIZE" -v done="$DONE" -v s="$ELAPSED" -v mps="$MPS_STATE" 'BEGIN { rate = 60 * done / s;
    printf "plan cost (estimate at this call'"'"'s %.2f runs per GPU-minute, MPS %s): %d runs of 1x, %.1f GPU-minutes at the 1x budget, %.1f at 2x\n",
      rate, mps, n, n / rate, 2 * n / rate }' | tee -a "$LOG"
else
  echo "plan cost: no rate measured in this call (${DONE} runs trained)" | tee -a "$LOG"
fi
tar czf "$OUT/small.tar.gz" -C "$RESULTS" "$(basename "$SCALE_DIR")" -C "$OUT" "$(basename "$LOG")"
echo "archive: $OUT/small.tar.gz ($(du -h "$OUT/small.tar.gz" | cut -f1))"
