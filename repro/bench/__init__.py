"""Decoding-speed benchmarks: the paper's speed studies (Table 2, Figures 4 and 7, Table 5) as
interleaved, repeated timings with medians and spreads.

``run_study(study, BenchSettings(...)) -> BenchResult``; the command line is :mod:`repro.bench.cli`.
"""

from repro.bench.settings import BenchResult, BenchSettings
from repro.bench.speed import STUDIES, run_study

__all__ = ["BenchSettings", "BenchResult", "run_study", "STUDIES"]
