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
# two workers, one test file each at a time (pytest-xdist): the tests run on one thread each (tests/conftest.py),
# so two of them fill a 2-core machine; one thread per process as well for the chapters, training runs and CLI calls
# the tests start, so that the two workers never oversubscribe the cores. `-n 0` runs in one process.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -n "${CANLIB_TEST_WORKERS:-2}" --dist loadfile "$@"
