#!/usr/bin/env bash
# The main job: set up .venv, then build the book at its CPU scale (SCALE=tiny) into _build/html.
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
.venv/bin/jupyter-book build --all -W .
echo "book: $(pwd)/_build/html/index.html"
