# The GPU machine's setup that scripts/gpu_small.sh, gpu_settle.sh, gpu_verdicts.sh and gpu_throughput.sh share,
# sourced with the script's arguments first thing:  . "$(dirname "$0")/gpu_env.sh" "$@"
# It sets DRY (1 for --dry-run), ROOT (this checkout, made the working folder), PY (PYTHON, default python3) and
# OUT (default .cache/<script>_out/, created), and exports what every run reads: canlib from this checkout, sacremoses
# from the wheel in .whl/ when the device's python lacks it (no network there), the Multi30k folders in
# CANLIB_DATA_DIR (default .gpu_data/) and the prepared corpora in CANLIB_CACHE_DIR (default /tmp/canlib-cache).
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT" || exit 2
PY="${PYTHON:-python3}"
OUT="${OUT:-$ROOT/.cache/$(basename "$0" .sh)_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PY" -c "import sacremoses" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/canlib-site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/canlib-site"
fi
export CANLIB_DATA_DIR="${CANLIB_DATA_DIR:-$ROOT/.gpu_data}"
export CANLIB_CACHE_DIR="${CANLIB_CACHE_DIR:-/tmp/canlib-cache}"
