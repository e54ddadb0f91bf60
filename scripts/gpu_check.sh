#!/usr/bin/env bash
# Issue 13's goals, measured in one run of under 5 minutes on one H100/H200 (no network, no install:
# the device's python3 and torch, canlib from this checkout).
#
#   bash scripts/gpu_check.sh              # on the GPU machine; everything lands in $OUT/gpu_check/
#   bash scripts/gpu_check.sh --dry-run    # on a CPU: tiny models, few sentences; checks the script gets to the end
#
# Steps, most valuable first, each under its own timeout (a step that fails or times out is
# recorded in status.txt and the next one runs):
#   1. bench:     eager and graphs tok/s of the Table 2 systems (fp16, batch 1, beam 4, forced length 30,
#                 d=512, V=32k) and captured == eager tokens for all nine systems  -> gpu_bench.json
#   2. breakdown: encoder / decoder layers / output projection / search per sentence, eager and graphs,
#                 for Balanced and CAN (search share of Balanced's eager time)       -> breakdown.json
#   3. cuda tests: the sync-free step loop and graphs == eager, as pytest tests        -> pytest.txt
#   4. training:  scripts/gpu_smoke_train.py --max-tokens 32768, Baseline and CAN (MFU) -> smoke_32k.json
#   5. cpu:       canlib vs CTranslate2 fp32 on the CPU, standard systems             -> cpu_ct2.json
#   6. ops:       operators per beam-search step of the nine systems, counted (CPU)   -> ops.json
# then summary.txt (every goal, target and value) and ONE archive $OUT/gpu_check.tar.gz.
set -u

DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-$ROOT/.cache/gpu_check_out}"
DIR="$OUT/gpu_check"
mkdir -p "$DIR"
PY="${PYTHON:-python3}"
STATUS="$DIR/status.txt"
: > "$STATUS"
START=$(date +%s)

if [ "$DRY" = 1 ]; then
  DEVICE=cpu
  BENCH=(--quick --device cpu --systems baseline,balanced,can
         --check-systems baseline,depth-9-4,balanced,depth-14-1,san,aan,can,can_attn,can_ffn
         --repeats 1 --sentences 2 --forced-length 4)
  BREAK=(--scale tiny --vocab-size 200 --device cpu --sentences 1 --repeats 1 --forced-length 4)
  TRAIN=(--tiny --presets baseline,can --steps 3 --skip 1 --device cpu --max-tokens 512)
  CPU=(--scale tiny --vocab-size 200 --sentences 1 --repeats 1 --forced-length 4)
  T1=120 T2=60 T3=60 T4=60 T5=60 T6=120
  OPS=(--systems balanced,can --scale tiny --vocab-size 200)
else
  DEVICE=cuda
  BENCH=(--device cuda --repeats 3 --sentences 8
         --check-systems baseline,depth-9-4,balanced,depth-14-1,san,aan,can,can_attn,can_ffn)
  BREAK=(--device cuda --sentences 5 --repeats 5 --graphs)
  TRAIN=(--presets baseline,can --steps 25 --skip 8 --max-tokens 32768)
  CPU=(--sentences 4 --repeats 2)
  T1=110 T2=60 T3=25 T4=70 T5=35 T6=60
  OPS=()
fi

step() {  # step NAME SECONDS COMMAND...: run under a timeout, log its output, record its status
  local name=$1 limit=$2
  shift 2
  local t0
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" > "$DIR/$name.log" 2>&1
  local rc=$?
  local why="ok"
  [ $rc -ne 0 ] && why="FAILED (exit $rc)"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="TIMED OUT after ${limit}s"
  echo "$name: $why in $(( $(date +%s) - t0 ))s: $*" | tee -a "$STATUS"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "dirty: $(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l) changed files"
  echo "dry_run: $DRY"
  "$PY" -c "import torch, sys; print('python:', sys.version.split()[0]); print('torch:', torch.__version__);
print('device:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu');
print('cpu_threads:', torch.get_num_threads())" 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
} > "$DIR/environment.txt"

step bench "$T1" "$PY" scripts/gpu_bench.py "${BENCH[@]}" --json "$DIR/gpu_bench.json"
step breakdown "$T2" "$PY" -m canlib bench breakdown --systems balanced,can "${BREAK[@]}" --no-progress \
  --json "$DIR/breakdown.json"
if "$PY" -c "import pytest" 2>/dev/null; then
  step cuda_tests "$T3" "$PY" -m pytest -q -p no:cacheprovider tests/test_search.py -k "cuda or static_buffer"
else
  echo "cuda_tests: skipped (no pytest on this machine)" | tee -a "$STATUS"
fi
step training "$T4" "$PY" scripts/gpu_smoke_train.py "${TRAIN[@]}" --out "$DIR/smoke_32k.json"
if "$PY" -c "import ctranslate2" 2>/dev/null; then
  SYSTEMS=baseline,balanced,ct2:baseline,ct2:balanced
else
  SYSTEMS=baseline,balanced
  echo "cpu: ctranslate2 is not installed here; timing canlib only" | tee -a "$STATUS"
fi
step cpu "$T5" "$PY" -m canlib bench speed --systems "$SYSTEMS" --device cpu "${CPU[@]}" --no-progress \
  --json "$DIR/cpu_ct2.json"
step ops "$T6" "$PY" -m canlib bench ops "${OPS[@]}" --json "$DIR/ops.json"

# every goal of issue 13 with its value (missing files give "not measured")
"$PY" - "$DIR" > "$DIR/summary.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path

d = Path(sys.argv[1])


def load(name):
    try:
        return json.loads((d / name).read_text())
    except (OSError, ValueError):
        return None


rows = []
bench = load("gpu_bench.json")
if bench:
    s, meta = bench["systems"], bench["meta"]
    for name, row in s.items():
        rows.append((f"{name} tok/s eager / graphs", "", f"{row.get('eager_tok_per_s', float('nan')):.1f} / "
                     f"{row.get('captured_tok_per_s', float('nan')):.1f}"))
    bal = s.get("balanced", {})
    rows.append(("whole-step graphs Balanced tok/s", ">= 5000", f"{bal.get('captured_tok_per_s', float('nan')):.1f}"))
    if "captured_tok_per_s" in s.get("can", {}) and "captured_tok_per_s" in bal:
        rows.append(("whole-step graphs CAN/Balanced", ">= 1.25", f"{s['can']['captured_tok_per_s'] / bal['captured_tok_per_s']:.3f}"))
    if "eager_tok_per_s" in s.get("can", {}) and "eager_tok_per_s" in bal:
        rows.append(("eager CAN/Balanced", ">= 1.30", f"{s['can']['eager_tok_per_s'] / bal['eager_tok_per_s']:.3f}"))
    same = meta.get("captured_matches_eager", {})
    rows.append(("captured == eager (all nine)", "all true", f"{all(same.values()) if same else 'not measured'} {same}"))
    if meta.get("errors"):
        rows.append(("bench errors", "none", json.dumps(meta["errors"])[:300]))
else:
    rows.append(("bench", "", "not measured"))
brk = load("breakdown.json")
if brk:
    for name, row in brk["systems"].items():
        for key in ("breakdown", "breakdown_graphs"):
            if key in row:
                b = row[key]
                rows.append((f"{name} {b['mode']} ms/sentence: encode/layers/output/search", "",
                             " / ".join(f"{b[p + '_ms']:.2f}" for p in ("encode", "layers", "output", "search"))))
                if "end_to_end_ms" in b:
                    rows.append((f"{name} {b['mode']} parts vs untimed end to end", "within 10%",
                                 f"{100 * b['gap']:+.1f}% ({sum(b[p + '_ms'] for p in ('encode', 'layers', 'output', 'search')):.2f}"
                                 f" vs {b['end_to_end_ms']:.2f} ms)"))
    b = brk["systems"].get("balanced", {}).get("breakdown")
    rows.append(("search share of Balanced's eager time", "< 10%", f"{100 * b['search_share']:.1f}%" if b else "not measured"))
    c = brk["systems"].get("can", {}).get("breakdown")
    if b and c:
        rows.append(("eager decoder layers Balanced/CAN (ops.json predicts its kernel ratio)", "",
                     f"{b['layers_ms'] / c['layers_ms']:.3f} ({b['layers_ms']:.2f} vs {c['layers_ms']:.2f} ms)"))
else:
    rows.append(("breakdown", "", "not measured"))
smoke = load("smoke_32k.json")
if smoke:
    for name, run in smoke.get("runs", {}).items():
        mfu = f"{100 * run['mfu']:.1f}%" if run.get("mfu") is not None else "n/a (no peak known for this device)"
        rows.append((f"training MFU {name} at {smoke.get('max_tokens')} tokens", ">= 30%",
                     f"{mfu} ({run['target_tokens_per_sec']:.0f} tok/s, {run['peak_memory_gib']} GiB)"))
else:
    rows.append(("training MFU", ">= 30%", "not measured"))
cpu = load("cpu_ct2.json")
if cpu:
    s = cpu["systems"]
    for name in ("baseline", "balanced"):
        if name in s and f"ct2:{name}" in s:
            rows.append((f"CPU canlib / CTranslate2 {name}", ">= 1.0",
                         f"{s[name]['tok_per_s'] / s['ct2:' + name]['tok_per_s']:.3f} "
                         f"({s[name]['tok_per_s']:.1f} vs {s['ct2:' + name]['tok_per_s']:.1f} tok/s)"))
        elif name in s:
            rows.append((f"CPU canlib {name} tok/s (no CTranslate2 here)", "", f"{s[name]['tok_per_s']:.1f}"))
    if cpu["meta"].get("busy_warning"):
        rows.append(("CPU busy warning", "", cpu["meta"]["busy_warning"]))
else:
    rows.append(("CPU canlib vs CTranslate2", ">= 1.0", "not measured"))
ops = load("ops.json")
if ops:
    for name, paths in ops["result"]["systems"].items():
        c = paths["cuda"]
        rows.append((f"{name} kernel operators per step / per layer / search (CUDA path)", "",
                     f"{c['step']['kernel_operators']} / {c['per_layer']['kernel_operators']:.1f} / {c['search']['kernel_operators']}"
                     f", host syncs {c['step']['host_syncs']}"))
    counted = ops["result"]["systems"]
    if "can" in counted and "balanced" in counted:
        can, bal = (counted[k]["cuda"]["per_layer"]["kernel_operators"] for k in ("can", "balanced"))
        rows.append(("CAN / standard kernel operators per layer-step", "<= 0.70", f"{can / bal:.3f}"))
else:
    rows.append(("operator counts", "", "not measured"))
width = max(len(r[0]) for r in rows)
for goal, target, value in rows:
    print(f"{goal:<{width}}  {target:<24} {value}")
EOF
echo "total: $(( $(date +%s) - START ))s" | tee -a "$STATUS"
cat "$DIR/summary.txt"
tar -czf "$OUT/gpu_check.tar.gz" -C "$OUT" gpu_check
echo "archive: $OUT/gpu_check.tar.gz"
