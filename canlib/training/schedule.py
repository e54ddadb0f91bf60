"""The inverse-square-root learning-rate schedule (fairseq's ``inverse_sqrt``, warmup_init_lr = 0).

Learning rate of update n (n = 1, 2, ...)::

    lr(n) = lr * min(n / warmup, sqrt(warmup / n))

linear warm-up to ``lr`` at n = warmup, then proportional to 1/sqrt(n).
"""

from __future__ import annotations

import math

import torch


def inverse_sqrt_lr(update: int, lr: float, warmup: int) -> float:
    """lr(n) = lr * min(n / warmup, sqrt(warmup / n)) for update n >= 1."""
    n = max(update, 1)
    return lr * min(n / warmup, math.sqrt(warmup / n))


def inverse_sqrt_scheduler(optimizer: torch.optim.Optimizer, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR whose factor after ``done`` updates is the schedule's value for update ``done + 1``
    (the optimizer's lr is the peak), so update 1 already runs at lr / warmup."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: inverse_sqrt_lr(done + 1, 1.0, warmup))
