"""Decoding-speed benchmarks: the paper's speed studies (Table 2, Figures 4 and 7, Table 5) as
interleaved, repeated timings with medians and spreads.

``run_study(study, BenchSettings(...)) -> BenchResult`` (:mod:`repro.bench.speed`, :mod:`repro.bench.settings`); the
command line is :mod:`repro.bench.cli`. The package imports nothing itself, so that reading the stored CPU tables
(:mod:`repro.bench.cpu`) loads no model.
"""
