# CUDA MPS (Multi-Process Service) for concurrent training processes; sourced by scripts/gpu_small.sh and
# scripts/gpu_throughput.sh. Without MPS the processes of one GPU take turns on it (time slices); under MPS
# their kernels run side by side. Each process computes exactly what it computes alone (same kernels).
#
#   mps_start   # start the daemon where the device allows: MPS_STATE="on", or "off: <why>" and nothing changed
#   mps_stop    # stop it (a no-op when mps_start did not start it); callers set `trap mps_stop EXIT`

MPS_STATE="off: not started"

mps_start() {
  MPS_STATE="off: nvidia-cuda-mps-control not found"
  command -v nvidia-cuda-mps-control >/dev/null 2>&1 || return 1
  if ! nvidia-smi -L >/dev/null 2>&1; then MPS_STATE="off: nvidia-smi sees no GPU"; return 1; fi
  local root="${CANLIB_MPS_DIR:-/tmp/canlib-mps}"
  mkdir -p "$root/pipe" "$root/log"
  export CUDA_MPS_PIPE_DIRECTORY="$root/pipe" CUDA_MPS_LOG_DIRECTORY="$root/log"
  if ! nvidia-cuda-mps-control -d > "$root/start.log" 2>&1; then
    MPS_STATE="off: the daemon did not start: $(tr '\n' ' ' < "$root/start.log" | cut -c1-200)"
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    return 1
  fi
  MPS_STARTED=1
  # a CUDA process must run under it, or MPS is stopped again and the processes run as before
  if ! timeout 120 "${PY:-python3}" -c "import torch; assert torch.zeros(1, device='cuda').add(1).item() == 1" \
      > "$root/probe.log" 2>&1; then
    mps_stop
    MPS_STATE="off: a CUDA process failed under the daemon: $(tail -n 1 "$root/probe.log" | cut -c1-200)"
    return 1
  fi
  MPS_STATE="on"
}

mps_stop() {
  if [ "${MPS_STARTED:-0}" = 1 ]; then
    echo quit | timeout 30 nvidia-cuda-mps-control >/dev/null 2>&1
    MPS_STARTED=0
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  [ "$MPS_STATE" = on ] && MPS_STATE="off: stopped"
  return 0
}
