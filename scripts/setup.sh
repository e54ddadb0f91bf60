#!/usr/bin/env bash
# Create .venv (or reuse it), install canlib with the test, book and repro extras, and put this checkout on the
# environment's path, so that `python -m repro` and the pages' `import repro` find the reproduction (not installed).
# CPU machines get torch 2.13.0 (the CPU wheel); set CANLIB_TORCH to override, e.g. CANLIB_TORCH="torch".
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then  # absent, or left half-made by an interrupted setup
  rm -rf .venv
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "${CANLIB_TORCH:-torch==2.13.0}"
.venv/bin/python -m pip install -q -e ".[test,book,repro]"
.venv/bin/python -c "import pathlib, site; pathlib.Path(site.getsitepackages()[0], 'canlib-checkout.pth').write_text('$(pwd)\n')"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
echo "canlib installed in $(pwd)/.venv"
