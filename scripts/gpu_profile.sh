#!/usr/bin/env bash
# Where the GPU's time goes, in one command (under 2 minutes on one H100/H200): torch.profiler tables for one
# small-can training update (8,192 tokens), one d=512 Baseline and one CAN update (32,768 tokens), one beam-search
# step of Balanced and CAN, and Baseline/CAN updates under each attention backend -> ONE archive, $OUT/profile.tar.gz.
#
#   bash scripts/gpu_profile.sh             # on the GPU machine
#   bash scripts/gpu_profile.sh --dry-run   # on a CPU: tiny models and sizes; checks the script end to end
#
# Needs no network and no data (synthetic tokens): the device's python3 and torch, canlib from this checkout.
# What each file holds: scripts/gpu_profile.py's docstring.
set -u

DRY=()
[ "${1:-}" = "--dry-run" ] && DRY=(--dry-run)
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT" || exit 2
PY="${PYTHON:-python3}"
OUT="${OUT:-$ROOT/.cache/gpu_profile_out}"
DIR="$OUT/profile"
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
LIMIT="${LIMIT:-150}"

{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  date -u; git rev-parse HEAD 2>/dev/null; git status --porcelain --untracked-files=no 2>/dev/null; } > "$DIR/environment.txt"
START=$(date +%s)
timeout "$LIMIT" "$PY" scripts/gpu_profile.py --out "$DIR" "${DRY[@]}" 2>&1 | tee "$DIR/profile.log"
STATUS=${PIPESTATUS[0]}
echo "gpu_profile: exit $STATUS after $(( $(date +%s) - START )) s" | tee -a "$DIR/profile.log"
tar czf "$OUT/profile.tar.gz" -C "$OUT" profile
echo "archive: $OUT/profile.tar.gz ($(du -h "$OUT/profile.tar.gz" | cut -f1))"
exit "$STATUS"
