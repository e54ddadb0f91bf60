"""scripts/bench_stacked.py: the --dry-run benchmark runs end to end on a CPU and prints its table (the numbers are
the machine's; only the table's structure is checked), and --padding counts the token slots a stack pads to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import SHARED_DATA
from conftest import missing as missing_data

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402
from bench_stacked import DRY_KS, HEADER, padded_share  # noqa: E402

from canlib.data.batching import TokenBatchSampler  # noqa: E402
from canlib.training.stacked import padded_stack  # noqa: E402


def test_the_benchmark_dry_run_prints_separate_and_stacked_rows_for_each_k(tmp_path):
    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        missing_data(f"real data {SHARED_DATA}/multi30k-en-de not present")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/bench_stacked.py"), "--dry-run", "--json", str(tmp_path / "b.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("case"))
    assert [c.strip() for c in lines[start].split("|")] == list(HEADER)
    rows = [[c.strip() for c in line.split("|")] for line in lines[start + 2 : start + 2 + 1 + 2 * len(DRY_KS)]]
    cases = [(r[0], int(r[1])) for r in rows]
    expected = [("separate (default)", 1)]
    expected += [(f"{kind} (planless)", k) for k in DRY_KS for kind in ("separate", "stacked")]
    assert cases == expected
    for r in rows:
        k, updates, seconds, rate = int(r[1]), int(r[2]), float(r[3]), float(r[4])
        assert updates % k == 0 and seconds > 0 and abs(rate - updates / seconds) < 0.01 * rate + 0.01
        assert float(r[5]) > 0 and float(r[6]) > 0
    assert lines[-1].startswith("device: CPU")
    assert (tmp_path / "b.json").is_file()


def test_the_padding_count_equals_the_slots_of_the_stacks_padded_tensors():
    gen = torch.Generator().manual_seed(0)
    src_lens = (torch.randint(3, 40, (300,), generator=gen)).tolist()
    tgt_lens = (torch.randint(3, 40, (300,), generator=gen)).tolist()

    def batch(indices):  # a batch as the trainer pads it: (rows, longest) tensors
        rows = len(indices)
        return {
            "src": torch.zeros(rows, max(src_lens[i] for i in indices), dtype=torch.long),
            "tgt_in": torch.zeros(rows, max(tgt_lens[i] for i in indices), dtype=torch.long),
            "tgt_out": torch.zeros(rows, max(tgt_lens[i] for i in indices), dtype=torch.long),
        }

    k, updates = 3, 5
    samplers = [iter(TokenBatchSampler(src_lens, tgt_lens, 200, seed=s + 1)) for s in range(k)]
    stacked = separate = 0
    for _ in range(updates):
        batches = [batch(next(s)) for s in samplers]
        src, tgt_in, _ = padded_stack(batches, pad_id=0)
        stacked += src.numel() + tgt_in.numel()
        separate += sum(b["src"].numel() + b["tgt_in"].numel() for b in batches)
    assert padded_share(src_lens, tgt_lens, 200, k, updates) == stacked / separate
    assert padded_share(src_lens, tgt_lens, 200, 1, updates) == 1.0
