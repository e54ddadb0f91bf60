"""Decoding-speed benchmarks: the paper's speed studies (Table 2, Figures 4 and 7, Table 5) as
interleaved, repeated timings with medians and spreads."""
