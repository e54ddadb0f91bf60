#!/usr/bin/env bash
# Training throughput on one H100/H200, in at most LIMIT seconds (default 480): the cases of
# scripts/gpu_throughput.py (its docstring says what each measures), most valuable first, each in its own
# process under its own timeout, one JSON per part written as it finishes, then training_throughput.json
# (device, commit, date, one row per case) and ONE archive, $OUT/throughput.tar.gz.
#
#   bash scripts/gpu_throughput.sh             # on the GPU machine
#   bash scripts/gpu_throughput.sh --dry-run   # on a CPU: tiny models, a few updates; checks the script end to end
#
# Resumable: the parts' files are kept in $THROUGHPUT_DIR (default .cache/gpu_throughput/, git-ignored), a part
# whose JSON is there is not run again (FRESH=1 runs everything again), so a second call goes on where the time
# limit stopped the first. torch.compile's caches go to .cache/compile/ (copy it to a fresh machine; the
# archive $OUT/compile_cache.tar.gz brings it back when it is under 15 MB).
#
# Needs no network: the device's python3 and torch, canlib from this checkout, the Multi30k folders in
# $CANLIB_DATA_DIR (default .gpu_data/, a git-ignored copy of ../shared/data/multi30k-*). The commit is read
# with git: on a device that gets a copy of the working tree without .git, run it in a clone carried in a
# git-ignored folder, copied along with the checkout:
#   git clone -q . .gl/repo && mkdir -p .gl/repo/.gpu_data && cp -r DATA/multi30k-* .gl/repo/.gpu_data/
#   (on the device) git config --global --add safe.directory '*'; cd .gl/repo && bash scripts/gpu_throughput.sh
set -u

# shellcheck source=scripts/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh" "$@"  # DRY, ROOT (the working folder), PY, OUT; the environment every run reads
DIR="${THROUGHPUT_DIR:-$ROOT/.cache/gpu_throughput$([ "$DRY" = 1 ] && echo _dry)}"
[ "${FRESH:-0}" = 1 ] && rm -rf "$DIR"
mkdir -p "$DIR"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$ROOT/.cache/compile/inductor}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$ROOT/.cache/compile/triton}"
LIMIT="${LIMIT:-480}"
STATUS="$DIR/status.txt"
# shellcheck source=scripts/mps.sh
. "$ROOT/scripts/mps.sh"
trap mps_stop EXIT
DRYFLAG=()
[ "$DRY" = 1 ] && DRYFLAG=(--dry-run)
COMMIT="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $COMMIT"
  echo "dirty: $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l) changed files"
  echo "dry_run: $DRY"
  "$PY" -c "import torch, sys; print('python:', sys.version.split()[0]); print('torch:', torch.__version__);
print('device:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')" 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader 2>/dev/null
} > "$DIR/environment.txt"
START=$(date +%s)
echo "start: $(date -u +%Y-%m-%dT%H:%M:%SZ), limit ${LIMIT}s" >> "$STATUS"

part() {  # part NAME SECONDS ARGS...: one part under its timeout (within what is left), skipped when done
  local name=$1 limit=$2
  shift 2
  if [ -f "$DIR/$name.json" ]; then
    echo "$name: done before, kept" | tee -a "$STATUS"
    return 0
  fi
  local left=$(( LIMIT - ($(date +%s) - START) ))
  if [ "$left" -lt 20 ]; then
    echo "$name: not started, ${left}s left of ${LIMIT}s; run the script again to go on" | tee -a "$STATUS"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0 rc why
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$PY" scripts/gpu_throughput.py "$@" --out "$DIR" "${DRYFLAG[@]}" > "$DIR/$name.log" 2>&1
  rc=$?
  why="ok"
  [ $rc -ne 0 ] && why="FAILED (exit $rc): $(grep -v '^\s*$' "$DIR/$name.log" | tail -n 1 | cut -c1-200)"
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && why="TIMED OUT after ${limit}s"
  [ $rc -ne 0 ] && FAILED=1
  echo "$name: $why in $(( $(date +%s) - t0 ))s" | tee -a "$STATUS"
}
FAILED=0

if [ "$DRY" = 1 ]; then
  "$PY" -m canlib data prepare multi30k-en-de --scale tiny > "$DIR/prepare.log" 2>&1
  part t1_can_best 120 t1 --preset can --variant best
  part t3 120 t3
  part t2_2_off 120 t2 --processes 2 --mps off
  mps_start; echo "mps: $MPS_STATE" | tee -a "$STATUS"; echo "$MPS_STATE" > "$DIR/mps.txt"
  [ "$MPS_STATE" = on ] && part t2_2_on 120 t2 --processes 2 --mps on
  mps_stop
  part t5 60 t5
  part t4 120 t4
else
  timeout 120 "$PY" -m canlib data prepare multi30k-en-de --scale small > "$DIR/prepare.log" 2>&1 \
    || echo "prepare: FAILED (see prepare.log)" | tee -a "$STATUS"
  part t1_can_as-is 90 t1 --preset can --variant as-is           # today: the first epoch's plans, 13 ms of kernels
  part t1_can_efficient 60 t1 --preset can --variant efficient   # attention without per-shape plans
  part t1_can_bucket8 60 t1 --preset can --variant bucket8       # a handful of shapes
  part t1_can_deterministic 60 t1 --preset can --variant deterministic  # its cost
  part t3 90 t3                                                  # bit-exact twice and on resume, or not
  part t2_4_off 90 t2 --processes 4 --mps off
  part t2_8_off 120 t2 --processes 8 --mps off
  mps_start; echo "mps: $MPS_STATE" | tee -a "$STATUS"; echo "$MPS_STATE" > "$DIR/mps.txt"
  if [ "$MPS_STATE" = on ]; then
    part t2_4_on 90 t2 --processes 4 --mps on
    part t2_8_on 120 t2 --processes 8 --mps on
  fi
  mps_stop
  part t5 90 t5                                                  # evaluation of a T2 model's four sets
  part t1_can_online-loss 60 t1 --preset can --variant online-loss
  part t4 150 t4                                                 # d=512 at 32,768 tokens: MFU
  part t1_can_compile-bucket8 180 t1 --preset can --variant compile-bucket8
  part t1_can_best 180 t1 --preset can --variant best
  part t3_best-deterministic 240 t3 --variant best-deterministic  # compiled: bit-exact twice and on resume?
  part t1_balanced_as-is 90 t1 --preset balanced --variant as-is
  part t1_balanced_fast 60 t1 --preset balanced --variant fast
fi

"$PY" scripts/gpu_throughput.py gather --out "$DIR" --commit "$COMMIT" "${DRYFLAG[@]}" > "$DIR/gather.log" 2>&1 \
  || echo "gather: FAILED (see gather.log)" | tee -a "$STATUS"
echo "total: $(( $(date +%s) - START ))s" | tee -a "$STATUS"
[ -f "$DIR/training_throughput.json" ] && cp "$DIR/training_throughput.json" "$OUT/"
tar czf "$OUT/throughput.tar.gz" -C "$(dirname "$DIR")" "$(basename "$DIR")"
echo "archive: $OUT/throughput.tar.gz ($(du -h "$OUT/throughput.tar.gz" | cut -f1))"
if [ -d "$ROOT/.cache/compile" ]; then
  tar czf "$OUT/compile_cache.tar.gz" -C "$ROOT/.cache" compile
  [ "$(stat -c %s "$OUT/compile_cache.tar.gz")" -gt 15000000 ] && rm -f "$OUT/compile_cache.tar.gz"
fi
exit "$FAILED"
