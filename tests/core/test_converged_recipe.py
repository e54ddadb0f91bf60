"""The converged small recipe: its budget is the optimum of the stored 2x validation curves, and it trains with
attention kernels that plan nothing per batch shape."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from canlib.catalogue import scale_spec
from canlib.training import TrainConfig
from canlib.training.kernels import kernel_choices

RUNS = Path(__file__).resolve().parents[2] / "book/results/small/beyond/runs/multi30k-en-de"


def test_the_converged_budget_is_where_the_mean_validation_loss_of_the_2x_runs_is_lowest():
    totals: dict[int, list[float]] = {}
    files = sorted(RUNS.glob("budget-*-x2-seed*.json"))
    assert len(files) == 6  # Balanced and CAN, three seeds each
    for path in files:
        for row in json.loads(path.read_text())["result"]["log"]:
            if row["kind"] == "valid":
                totals.setdefault(row["step"], []).append(row["valid_loss"])
    means = {step: sum(v) / len(v) for step, v in totals.items() if len(v) == len(files)}
    best = min(means, key=means.get)
    recipe = scale_spec("small").recipe("converged")
    assert recipe["max_steps"] == best
    assert best - recipe["valid_every"] * (recipe["average_last"] - 1) in means  # the averaged checkpoints exist
    assert scale_spec("small").recipe("")["max_steps"] == 1200  # the 1x budget the stored runs were trained with
    TrainConfig(**recipe)  # a valid TrainConfig


def test_the_converged_recipe_leaves_out_the_attention_kernel_that_plans_per_shape():
    # on a CPU only the choice can be checked; scripts/bench_stacked.py measures the first epoch on a GPU
    assert scale_spec("small").recipe("converged")["sdpa_backend"] == "planless"
    before = torch.backends.cuda.cudnn_sdp_enabled()
    with kernel_choices("planless", deterministic=False):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before
