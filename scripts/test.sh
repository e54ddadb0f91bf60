#!/usr/bin/env bash
# The test command: set up .venv, then run the whole suite (unit tests, notebooks under nbval, book build).
# Real data comes from CANLIB_DATA_DIR (default: ../shared/data beside the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CANLIB_DATA_DIR=${CANLIB_DATA_DIR:-$(cd .. && pwd)/shared/data}
# trained tiny runs and measured studies are cached here (keyed by code and config), so the
# second execution of a chapter (nbval, then the HTML build) reuses the first one's work
export CANLIB_CACHE_DIR=${CANLIB_CACHE_DIR:-$(pwd)/.cache/canlib}
# matplotlib's font list, cached per checkout: a list cached in ~/.cache by another environment can name
# font files that are gone, and then every formula in a figure prints "findfont" warnings into the chapters
export MPLCONFIGDIR=${MPLCONFIGDIR:-$(pwd)/.cache/matplotlib}
exec .venv/bin/python -m pytest "$@"
