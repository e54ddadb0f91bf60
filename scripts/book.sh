#!/usr/bin/env bash
# The main job: set up .venv, then build the book at its CPU scale (SCALE=tiny) into _build/html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CANLIB_DATA_DIR=${CANLIB_DATA_DIR:-$(cd .. && pwd)/shared/data}
.venv/bin/jupyter-book build --all -W .
echo "book: $(pwd)/_build/html/index.html"
