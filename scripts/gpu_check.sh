#!/usr/bin/env bash
# The decoding-speed goals, measured in one call of under 5 minutes on one H100/H200 (no network, no install: the
# GPU machine's python3 and torch, canlib from this checkout, the Multi30k folder copied into .gpu_data/).
#
#   bash scripts/gpu_check.sh              # on the GPU machine; everything lands in $OUT/gpu_check/
#   bash scripts/gpu_check.sh --dry-run    # on a CPU: tiny models, few sentences; checks the script gets to the end
#   bash scripts/gpu_check.sh --compiled   # a second call of under 5 minutes: the compiled decode step (below)
#   bash scripts/gpu_check.sh --steps=bench,profile   # only the steps named (default: all; "fused" adds the fused
#                                                     # select step's two modes to bench and profile)
#
# Prepare the checkout, then copy it to the GPU machine:  mkdir -p .gpu_data && cp -r DATA/multi30k-en-de .gpu_data/
#
# Steps, most valuable first, each under its own timeout (their sum is 405 s; a step that fails or times out is
# recorded in status.txt and the next one runs):
#   1. bench:      eager and whole-step-graph tok/s of Baseline, Balanced, SAN, AAN and CAN (fp16, batch 1, beam 4,
#                  forced length 30, d=512, V=32k) on the first 20 test2016 sources at their real lengths, 10
#                  interleaved repeats (A, B, A, B ...) per mode, each repeat at least 1 s (the sources translated
#                  as many times over as that takes; the three numbers: repro.bench.settings.SpeedPlan, which the
#                  speed standard reads), the ratios' median and spread over the repeats, and
#                  captured == eager tokens for all nine systems; with "fused" where triton is installed, both modes
#                  again with the fused select step (two Triton kernels) and its tokens against the PyTorch step
#                                                                                      -> speed.json
#   2. profile:    kernel launches per eager decode step of Balanced and CAN under torch.profiler, with the
#                  PyTorch and the fused select step                                     -> profile/
#   3. breakdown:  encoder / decoder layers / output projection / search, eager and graphs -> breakdown.json
#   4. cuda tests: the sync-free step loop and graphs == eager, as pytest tests        -> cuda_tests.log
#   5. ops:        kernel operators per step of the nine systems, counted on the GPU's code path (CPU) -> ops.json
# then summary.txt (every goal, target and value) and ONE archive $OUT/gpu_check.tar.gz. speed.json, breakdown.json and
# profile/profile.json are stored results (repro.bench.stored: the figures and their provenance, computed here), which
# `python -m repro ingest --from-device` checks and copies to book/results/gpu/<run>/ unchanged.
#
# With --compiled (the encoder, decoder layers and output compiled by torch.compile's Inductor, which fuses
# bias + ReLU and residual add + LayerNorm; compiling takes tens of seconds a system, so it has a call of its own):
#   1. compiled bench:   Balanced and CAN as in bench 1, eager and graphs, with the compiled decoder, and their
#                        tokens against eager                                           -> speed_compiled.json
#   2. compiled profile: kernel launches per compiled eager decode step                   -> profile_compiled/
# then summary_compiled.txt, status_compiled.txt and ONE archive $OUT/gpu_check_compiled.tar.gz (the same
# gpu_check/ folder, its files named apart from the first call's, so both unpack into one folder).
set -u

DRY=0
COMPILED=0
STEPS=bench,profile,breakdown,cuda_tests,ops,fused
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    --compiled) COMPILED=1 ;;
    --steps=*) STEPS=${arg#--steps=} ;;
    *) echo "gpu_check.sh: unknown option $arg (use --dry-run, --compiled, --steps=bench,profile,...)" >&2; exit 2 ;;
  esac
done
TAG=""
[ "$COMPILED" = 1 ] && TAG="_compiled"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# --compiled: Inductor's kernels kept in the checkout, so a later call that carries .cache/compile skips compiling
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$ROOT/.cache/compile/inductor}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$ROOT/.cache/compile/triton}"
OUT="${OUT:-$ROOT/.cache/gpu_check_out}"
DIR="$OUT/gpu_check"
mkdir -p "$DIR"
PY="${PYTHON:-python3}"
STATUS="$DIR/status$TAG.txt"
: > "$STATUS"
START=$(date +%s)
NINE=baseline,depth-9-4,balanced,depth-14-1,san,aan,can,can_attn,can_ffn
# the test2016 sources: .gpu_data/ (copied to the GPU machine), else CANLIB_DATA_DIR or ../shared/data
for candidate in "$ROOT/.gpu_data" "${CANLIB_DATA_DIR:-}" "$ROOT/../shared/data"; do
  if [ -n "$candidate" ] && [ -f "$candidate/multi30k-en-de/test_2016_flickr.en" ]; then DATA="$candidate"; break; fi
done
if [ -n "${DATA:-}" ]; then
  SOURCES=(--sources test2016 --data-dir "$DATA")
else
  SOURCES=(--sources random)
  echo "bench: no multi30k-en-de/test_2016_flickr.en found (copy it into .gpu_data); random sources instead" | tee -a "$STATUS"
fi

FUSED=()
PROFILE_CASES=decode_balanced,decode_can
if [[ ",$STEPS," != *",fused,"* ]]; then
  echo "bench, profile: the fused select step not selected (--steps=...,fused)" | tee -a "$STATUS"
elif "$PY" -c "import triton" 2>/dev/null; then
  FUSED=(--fused)
  PROFILE_CASES=$PROFILE_CASES,decode_balanced_fused,decode_can_fused
else
  echo "bench, profile: triton is not installed here; the fused select step is not measured" | tee -a "$STATUS"
fi

if [ "$DRY" = 1 ]; then
  BENCH=(--dry-run --systems balanced,can --check-systems "$NINE" --repeats 3 --sentences 2 --forced-length 3 --min-seconds 0.2)
  PROFILE=(--dry-run)
  BREAK=(--scale tiny --vocab-size 200 --device cpu --sentences 1 --repeats 1 --forced-length 4)
  OPS=(--systems balanced,can --scale tiny --vocab-size 200)
  T1=300 T2=120 T3=60 T4=60 T5=60  # a CPU runs the Triton kernels in its interpreter: slow
  CBENCH=(--dry-run --repeats 3 --sentences 2 --forced-length 3)
  BACKEND=aot_eager  # traces the compiled graphs without generating code (Inductor's C++ on a CPU is minutes)
  C1=300 C2=120
else
  # repeats, their shortest length and the forced length: gpu_bench.py's defaults, the speed standard's (SpeedPlan)
  BENCH=(--device cuda --systems baseline,balanced,san,aan,can --check-systems "$NINE" --sentences 20)
  PROFILE=()
  BREAK=(--device cuda --sentences 5 --repeats 3 --graphs)
  OPS=()
  T1=260 T2=45 T3=35 T4=30 T5=30
  CBENCH=(--device cuda --sentences 50)
  BACKEND=inductor
  C1=170 C2=100
fi

step() {  # step NAME SECONDS COMMAND...: run under a timeout, log its output, record its status
  local name=$1 limit=$2
  shift 2
  case ",$STEPS," in *",$name,"*) ;; *) echo "$name: not selected (--steps=$STEPS)" | tee -a "$STATUS"; return 0 ;; esac
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

if [ "$COMPILED" = 1 ]; then
  step compiled_bench "$C1" "$PY" scripts/gpu_bench.py "${CBENCH[@]}" "${SOURCES[@]}" --systems balanced,can --compiled "$BACKEND" \
    --only --json "$DIR/speed_compiled.json"
  step compiled_profile "$C2" "$PY" scripts/gpu_profile.py --out "$DIR/profile_compiled" \
    --cases decode_balanced_compiled,decode_can_compiled --compile-backend "$BACKEND" "${PROFILE[@]}"
else
  step bench "$T1" "$PY" scripts/gpu_bench.py "${BENCH[@]}" "${SOURCES[@]}" "${FUSED[@]}" --json "$DIR/speed.json"
  step profile "$T2" "$PY" scripts/gpu_profile.py --out "$DIR/profile" --cases "$PROFILE_CASES" "${PROFILE[@]}"
  step breakdown "$T3" "$PY" -m repro bench breakdown --systems balanced,can "${BREAK[@]}" --no-progress \
    --store "$DIR/breakdown.json"
  if "$PY" -c "import pytest" 2>/dev/null; then
    step cuda_tests "$T4" "$PY" -m pytest -q -p no:cacheprovider tests/core/test_search.py -k "cuda or static_buffer"
  else
    echo "cuda_tests: skipped (no pytest on this machine)" | tee -a "$STATUS"
  fi
  step ops "$T5" "$PY" -m repro bench ops "${OPS[@]}" --json "$DIR/ops.json"
fi

# every goal with its value (missing files give "not measured")
"$PY" - "$DIR" "$TAG" > "$DIR/summary$TAG.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path

d, tag = Path(sys.argv[1]), sys.argv[2]  # tag: "" (the first call) or "_compiled"


def load(name):
    try:
        return json.loads((d / name).read_text())
    except (OSError, ValueError):
        return None


rows = []
nan = float("nan")
bench = load(f"speed{tag}.json")  # the stored result: {"result": ..., "provenance": ...}
if bench:
    meta = bench["result"]
    for name, row in meta["systems"].items():
        for suffix in ("", "_fused", "_compiled"):
            eager, captured = row.get(f"eager{suffix}", {}), row.get(f"captured{suffix}", {})
            if eager or captured:
                rows.append((f"{name} tok/s eager{suffix} / graphs (median of repeats)", "",
                             f"{eager.get('tok_per_s', nan):.1f} / {captured.get('tok_per_s', nan):.1f}"))
    for key, goal in meta.get("goals", {}).items():
        value = goal["value"]
        shown = "not measured" if value is None else f"{value:.3f}" if value < 100 else f"{value:.1f}"
        rows.append((f"{key} ({'met' if goal['met'] else 'NOT met'})", f">= {goal['target']}", shown))
    for mode, by_system in meta.get("ratios", {}).items():
        for name, r in by_system.items():
            rows.append((f"{mode} {name}/balanced over {r['repeats']} interleaved repeats", "",
                         f"median {r['median']:.3f}, quartiles {r['q1']:.3f}-{r['q3']:.3f}, range {r['min']:.3f}-{r['max']:.3f}"))
    src = meta.get("sources", {})
    if src.get("lengths"):
        rows.append(("sources", "", f"{len(src['lengths'])} {src.get('kind')}, {sum(src['lengths']) / len(src['lengths']):.1f} tokens on average"))
    if not tag:
        same = meta.get("captured_matches_eager", {})
        rows.append(("captured == eager (all nine)", "all true", f"{all(same.values()) if same else 'not measured'} {same}"))
    if "compiled_matches_eager" in meta:
        rows.append(("compiled == eager tokens (eager and graphs)", "all true", str(meta["compiled_matches_eager"])))
    if meta.get("errors"):
        rows.append(("bench errors", "none", json.dumps(meta["errors"])[:300]))
else:
    rows.append(("bench", "", "not measured"))
profile = (load("profile_compiled/profile.json" if tag else "profile/profile.json") or {}).get("result", {})
for suffix, how in ((("_compiled", "compiled decoder"),) if tag else (("", "PyTorch select"), ("_fused", "fused select"))):
    for name, goal in (("balanced", 40), ("can", 30)):
        case = profile.get("cases", {}).get(f"decode_{name}{suffix}", {})
        rows.append((f"{name} kernel launches per eager decode step, {how} (profiler)", f"<= {goal}",
                     f"{case['kernel_launches']} ({case.get('wall_ms')} ms a step)" if "kernel_launches" in case
                     else profile.get("errors", {}).get(f"decode_{name}{suffix}", "not measured")))
if bench and "fused_matches_eager" in bench["result"]:
    rows.append(("fused select == PyTorch select tokens", "all true", str(bench["result"]["fused_matches_eager"])))
if not tag:
    brk = load("breakdown.json")
    if brk:
        brk = brk["result"]
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
    ops = load("ops.json")
    if ops:
        for name, paths in ops["result"]["systems"].items():
            for path, how in (("cuda", "GPU path"), ("cuda-fused", "GPU path, fused select")):
                if path not in paths:
                    continue
                c = paths[path]
                rows.append((f"{name} kernel operators per step / per layer / search ({how}, counted)",
                             "<= 40" if name == "balanced" else "<= 30" if name == "can" else "",
                             f"{c['step']['kernel_operators']} / {c['per_layer']['kernel_operators']:.1f} / "
                             f"{c['search']['kernel_operators']}, host syncs {c['step']['host_syncs']}"))
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
cat "$DIR/summary$TAG.txt"
tar -czf "$OUT/gpu_check$TAG.tar.gz" -C "$OUT" gpu_check
echo "archive: $OUT/gpu_check$TAG.tar.gz"
