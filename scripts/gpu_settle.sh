#!/usr/bin/env bash
# What settles the most BLEU claims per GPU-minute, in at most 9 minutes of one H100/H200: converged models
# (the small scale's converged recipe, canlib.catalogue.Scale.recipe("converged")), trained side by side as separate
# processes, in order of value:
#   1. seeds 1-3 of the Table 2 systems (baseline, balanced, can), which the headline claims compare;
#   2. seeds 4-6 of the Table 2 systems;
#   3. seeds 1-3 of SAN, AAN and the Table 5 ablations (san, aan, can_attn, can_ffn);
#   4. seeds 1-3 of the controls: CAN keeping its attention residual (can_residual), and the split-free CAN
#      (can_nosplit);
#   then seeds 7-10 of the Table 2 systems, and seeds 4-6 and 7-10 of the others and the controls;
# each run evaluated with beam 4 as it finishes and stored as the study beyond/converged* of book/results/small;
# then the stored hypotheses rescored (`python -m repro rescore`) and everything this call stored packed into ONE
# archive. Sized by what was measured: processes side by side train about 64 model-updates/s together (twelve on an
# H100, book/results/small/beyond/runs), so one step of nine 2,000-update runs takes about 5 minutes; five seeds
# stacked (--stack) trained 16 on an H200, fewer than one run alone (measurements/h200-2026-11-28-5af6bb5), so
# they are not stacked here.
#
#   bash scripts/gpu_settle.sh             # on the GPU machine: $OUT/settle.tar.gz (unpack into book/results)
#   bash scripts/gpu_settle.sh --dry-run   # on a CPU: tiny models, a few updates, seeds 1-3: the script end to end
#
# Each step runs under its own timeout inside LIMIT seconds (default 540); an interrupted stack resumes from its
# checkpoints on the next call, and stored models are skipped. Needs what scripts/gpu_small.sh needs (no network;
# the Multi30k folders in $CANLIB_DATA_DIR, default .gpu_data/).
set -u

# shellcheck source=scripts/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh" "$@"  # DRY, ROOT (the working folder), PY, OUT; the environment every run reads
LOG="$OUT/settle.log"

if [ "$DRY" = 1 ]; then
  RESULTS="$OUT/dry"
  SCALE=tiny
  WHERE=(--scale tiny --max-steps 6 --out "$RESULTS")
  SEEDS=(1,2 3 "")
  LIMIT="${LIMIT:-900}"
else
  RESULTS="$ROOT/book/results"
  SCALE=small
  WHERE=(--scale small)
  SEEDS=(1,2,3 4,5,6 7,8,9,10)
  LIMIT="${LIMIT:-540}"
fi
SCALE_DIR="$RESULTS/$SCALE"
RESERVE=60  # seconds kept for the rescore and the archive

{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; date -u; git rev-parse HEAD 2>/dev/null; } > "$LOG"
# the controls: the converged studies beside the main one
CONTROLS=$("$PY" -c "from repro.results.studies import CONVERGED; print(','.join(n for n in CONVERGED if n != 'converged'))")
START=$(date +%s)

step() {  # step NAME SEEDS STUDIES SYSTEMS: one `python -m repro experiment` call in the time left
  local name="$1" seeds="$2" studies="$3" systems="$4"
  [ -n "$seeds" ] || return 0
  local left=$(( LIMIT - RESERVE - ($(date +%s) - START) ))
  if [ "$left" -gt 30 ]; then
    timeout "$left" "$PY" -m repro experiment "${WHERE[@]}" --seeds "$seeds" --studies "$studies" \
      --systems "$systems" 2>&1 | tee -a "$LOG"
    echo "step ($name): exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" | tee -a "$LOG"
  else
    echo "step ($name): not started, ${left} s left; run this script again to go on" | tee -a "$LOG"
  fi
}
TABLE2=baseline,balanced,can
OTHERS=san,aan,can_attn,can_ffn
step "Table 2 systems, seeds ${SEEDS[0]}" "${SEEDS[0]}" converged "$TABLE2"
step "Table 2 systems, seeds ${SEEDS[1]}" "${SEEDS[1]}" converged "$TABLE2"
step "SAN, AAN and ablations, seeds ${SEEDS[0]}" "${SEEDS[0]}" converged "$OTHERS"
step "controls, seeds ${SEEDS[0]}" "${SEEDS[0]}" "$CONTROLS" can,can_nosplit
step "Table 2 systems, seeds ${SEEDS[2]}" "${SEEDS[2]}" converged "$TABLE2"
for k in 1 2; do
  step "SAN, AAN and ablations, seeds ${SEEDS[k]}" "${SEEDS[k]}" converged "$OTHERS"
  step "controls, seeds ${SEEDS[k]}" "${SEEDS[k]}" "$CONTROLS" can,can_nosplit
done
# each study's summary over every seed stored (a step's summary names its own seeds only)
timeout 60 "$PY" -m repro summarise "${WHERE[@]}" --studies "converged,$CONTROLS" --seeds "$(IFS=,; echo "${SEEDS[*]}" | sed 's/,*$//')" 2>&1 | tee -a "$LOG"
timeout 120 "$PY" -m repro rescore "$SCALE_DIR" 2>&1 | tee -a "$LOG"
echo "rescore: exit ${PIPESTATUS[0]}" | tee -a "$LOG"
STORED=$(grep -cE '^\[[0-9]+/[0-9]+\] .*\(converged[a-z-]*\): test sacreBLEU' "$LOG")
echo "stored: $STORED converged model(s) in $(( $(date +%s) - START )) s" | tee -a "$LOG"
( cd "$RESULTS" && find "$SCALE/beyond" -name 'converged*' -print ) > "$OUT/settle.files"
tar czf "$OUT/settle.tar.gz" -C "$RESULTS" -T "$OUT/settle.files" -C "$OUT" "$(basename "$LOG")"
echo "archive: $OUT/settle.tar.gz ($(du -h "$OUT/settle.tar.gz" | cut -f1), $(wc -l < "$OUT/settle.files") files)"
