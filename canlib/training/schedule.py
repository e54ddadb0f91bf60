"""The inverse-square-root learning-rate schedule (fairseq's ``inverse_sqrt``, warmup_init_lr = 0).

Learning rate of update n (n = 1, 2, ...)::

    lr(n) = lr * min(n / warmup, sqrt(warmup / n))

linear warm-up to ``lr`` at n = warmup, then proportional to 1/sqrt(n).
"""

from __future__ import annotations

import math
import warnings

import torch


def inverse_sqrt_lr(update: int, lr: float, warmup: int) -> float:
    """lr(n) = lr * min(n / warmup, sqrt(warmup / n)) for update n >= 1."""
    n = max(update, 1)
    return lr * min(n / warmup, math.sqrt(warmup / n))


def inverse_sqrt_scheduler(optimizer: torch.optim.Optimizer, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR whose factor after ``done`` updates is the schedule's value for update ``done + 1``
    (the optimizer's lr is the peak), so update 1 already runs at lr / warmup."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: inverse_sqrt_lr(done + 1, 1.0, warmup))


class LongWarmupWarning(UserWarning):
    """The warm-up is longer than the whole run: the learning rate never reaches its peak (``canlib train`` makes
    this an error unless ``--warmup`` was given)."""


def check_warmup(planned: int | None, lr: float, warmup: int) -> None:
    """Warn (:class:`LongWarmupWarning`) when the warm-up is longer than the ``planned`` updates: the schedule would
    stop while the learning rate is still climbing."""
    if planned is None or warmup <= planned:
        return
    peak = inverse_sqrt_lr(planned, lr, warmup)
    warnings.warn(
        LongWarmupWarning(
            f"warmup={warmup} is longer than the whole run ({planned} updates): the learning rate would "
            f"end at {peak:.2g}, {peak / lr:.1%} of lr={lr:g}; give a warm-up shorter than "
            f"the run, e.g. --warmup {max(1, planned // 10)} (a tenth of it)"
        ),
        stacklevel=3,
    )
