#!/usr/bin/env bash
# The test command: set up .venv, then run the whole suite (unit tests, notebooks under nbval, book build).
# Real data comes from CANLIB_DATA_DIR (default: ../shared/data beside the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CANLIB_DATA_DIR=${CANLIB_DATA_DIR:-$(cd .. && pwd)/shared/data}
exec .venv/bin/python -m pytest "$@"
