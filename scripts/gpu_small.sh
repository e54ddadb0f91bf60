#!/usr/bin/env bash
# The `small` scale on one H100/H200: train every run (Table 2 systems and ablations x 3 seeds, the depth
# systems x 1, Baseline/Balanced/CAN x 2 seeds on five more Multi30k directions), evaluate them with beam 4,
# run the studies on the trained models, check that sacreBLEU recomputed from the stored hypotheses equals
# the stored scores, and pack book/results/small/ into ONE archive for the repository.
#
#   bash scripts/gpu_small.sh             # on the GPU machine: results in book/results/small, $OUT/small.tar.gz
#   bash scripts/gpu_small.sh --dry-run   # on a CPU: tiny models, 4 updates, two systems; checks the script end to end
#
# Needs no network: the device's python3 and torch, canlib from this checkout, the Multi30k folders in
# $CANLIB_DATA_DIR (default .gpu_data/, a git-ignored copy of ../shared/data/multi30k-*), and sacremoses
# as a wheel in .whl/ when the device's python lacks it. Prepare here, then run with carry [".gpu_data", ".whl"]:
#   mkdir -p .gpu_data && cp -r ../shared/data/multi30k-* .gpu_data/
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl sacremoses
set -u

DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT" || exit 2
PY="${PYTHON:-python3}"
OUT="${OUT:-$ROOT/.cache/gpu_small_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PY" -c "import sacremoses" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/canlib-site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/canlib-site"
fi
export CANLIB_DATA_DIR="${CANLIB_DATA_DIR:-$ROOT/.gpu_data}"
export CANLIB_CACHE_DIR="${CANLIB_CACHE_DIR:-/tmp/canlib-cache}"
LOG="$OUT/small.log"

if [ "$DRY" = 1 ]; then
  RESULTS="$OUT/dry"
  RUN=(--scale tiny --max-steps 4 --systems baseline,can --seeds 1,2 --jobs 2 --out "$RESULTS")
  LIMIT=600
else
  RESULTS="$ROOT/book/results"
  RUN=(--scale small --jobs "${JOBS:-16}")
  LIMIT="${LIMIT:-540}"
fi
SCALE_DIR="$RESULTS/$([ "$DRY" = 1 ] && echo tiny || echo small)"

{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; date -u; git rev-parse HEAD 2>/dev/null; } > "$LOG"
START=$(date +%s)
timeout "$LIMIT" "$PY" -m canlib experiment "${RUN[@]}" 2>&1 | tee -a "$LOG"
echo "experiment: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" | tee -a "$LOG"
timeout 120 "$PY" -m canlib experiment --rescore "$SCALE_DIR" 2>&1 | tee -a "$LOG"
echo "rescore: exit ${PIPESTATUS[0]}" | tee -a "$LOG"
tar czf "$OUT/small.tar.gz" -C "$RESULTS" "$(basename "$SCALE_DIR")" -C "$OUT" "$(basename "$LOG")"
echo "archive: $OUT/small.tar.gz ($(du -h "$OUT/small.tar.gz" | cut -f1))"
