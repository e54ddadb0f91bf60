#!/usr/bin/env bash
# The GPU runs the book's open verdicts wait on, most valuable first, in one call of under 10 minutes on one
# H100/H200 (no network: the device's python3 and torch, canlib from this checkout, the Multi30k folders in
# .gpu_data/ and the sacremoses wheel in .whl/, prepared as scripts/gpu_small.sh says):
#
#   bash scripts/gpu_verdicts.sh            # on the GPU machine: $OUT/gpu_check.tar.gz and $OUT/small.tar.gz
#   bash scripts/gpu_verdicts.sh --dry-run  # on a CPU: tiny models, 4 updates, results under $OUT; checks the script
#
#   1. Decoding speed of the code as it is (scripts/gpu_check.sh --steps=bench,profile): Baseline, Balanced, SAN, AAN
#      and CAN, eager and with whole-step CUDA graphs, 10 interleaved repeats of at least 1 s each, captured ==
#      eager tokens for the nine systems, kernel launches per step. Alone on the GPU: nothing else runs beside it.
#   2. In the time left, side by side on the GPU (one `python -m repro experiment` each, so every run starts at once):
#      a. the third seed of Balanced and CAN at twice the updates (the budget study), which the headline BLEU
#         claim's standard of three seeds needs;
#      b. Balanced seed 1 again for its weights, read by the similarity-balanced and approximations analyses;
#      c. the second seed of the depth systems 9/4 and 14/1;
#      and the CUDA tests of the search beside them (correctness only: their times are not read).
#   3. book/results/small and the logs packed into $OUT/small.tar.gz (recompute its scores from the stored
#      hypotheses where it is unpacked: `python -m repro rescore book/results/small`).
# LIMIT (default 575 s) bounds the whole; each part runs under its own timeout and a run that cannot finish by
# the deadline is not started (repro.experiments.pool). Store what comes back with `python -m repro ingest` (speed) and by
# unpacking small.tar.gz over book/results/ (the runs).
set -u

LIMIT="${LIMIT:-575}"
START=$(date +%s)
# shellcheck source=scripts/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh" "$@"  # DRY, ROOT (the working folder), PY, OUT; the environment every run reads
mkdir -p "$OUT/logs"
export OUT  # scripts/gpu_check.sh below writes into it too
LOG="$OUT/logs/verdicts.log"
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  date -u; git rev-parse HEAD 2>/dev/null; } > "$LOG"
say() { echo "[$(( $(date +%s) - START )) s] $*" | tee -a "$LOG"; }

if [ "$DRY" = 1 ]; then
  SCALE=tiny
  RESULTS="$OUT/results"
  RUN=(--scale tiny --max-steps 4 --out "$RESULTS")
  CHECK=(--dry-run)
else
  SCALE=small
  RESULTS="$ROOT/book/results"
  RUN=(--scale small)
  CHECK=()
fi
CORPUS=multi30k-en-de

# the prepared corpus once, before the concurrent commands below would each prepare it
"$PY" -c "from canlib.data.preparation import prepare; from canlib.catalogue import scale_spec
prepare('$CORPUS', scale_spec('$SCALE').corpus_scale, progress=False)" >> "$LOG" 2>&1
say "corpus prepared: exit $?"

# 1. speed, alone on the GPU
PYTHON="$PY" bash scripts/gpu_check.sh "${CHECK[@]}" --steps=bench,profile > "$OUT/logs/gpu_check.log" 2>&1
say "speed (gpu_check.sh --steps=bench,profile): exit $?"

# 2. the runs, side by side, until the deadline (20 s kept for packing)
LEFT=$(( LIMIT - ($(date +%s) - START) - 20 ))
export CANLIB_DEADLINE=$(( $(date +%s) + LEFT ))
say "training: ${LEFT} s left"
if [ "$LEFT" -gt 60 ]; then
  timeout "$LEFT" "$PY" -m repro experiment "${RUN[@]}" --corpora "$CORPUS" --studies budget --seeds 3 \
    > "$OUT/logs/budget_seed3.log" 2>&1 &
  A=$!
  timeout "$LEFT" "$PY" -m repro experiment "${RUN[@]}" --corpora "$CORPUS" --studies similarity-balanced,approximations \
    > "$OUT/logs/analyses.log" 2>&1 &
  B=$!
  timeout "$LEFT" "$PY" -m repro experiment "${RUN[@]}" --corpora "$CORPUS" --studies runs \
    --systems depth-9-4,depth-14-1 --seeds 2 > "$OUT/logs/depth_seed2.log" 2>&1 &
  C=$!
  if [ "$DRY" = 0 ] && "$PY" -c "import pytest" 2>/dev/null; then
    timeout 120 "$PY" -m pytest -q -p no:cacheprovider tests/core/test_search.py -k "cuda or static_buffer" \
      > "$OUT/logs/cuda_tests.log" 2>&1 &
    D=$!
  else
    D=""
  fi
  wait $A; say "budget seed 3: exit $?"
  wait $B; say "similarity-balanced, approximations: exit $?"
  wait $C; say "depth seed 2: exit $?"
  [ -n "$D" ] && { wait "$D"; say "cuda tests: exit $?"; }
else
  say "training: not started (${LEFT} s left)"
fi

# 3. pack
tar czf "$OUT/small.tar.gz" -C "$RESULTS" "$SCALE" -C "$OUT" logs
say "packed $OUT/small.tar.gz ($(du -h "$OUT/small.tar.gz" | cut -f1)); $OUT/gpu_check.tar.gz"
