"""A probe of peak memory in tensors, not bytes: how many large blocks a computation holds alive at once. The
chunked loss (test_training_throughput.py) and the online loss (test_online_loss.py) are checked with it."""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class LargeTensors(TorchDispatchMode):
    """Counts how many blocks of memory holding at least ``numel`` elements are alive at once (peak),
    and the largest tensor."""

    def __init__(self, numel: int) -> None:
        super().__init__()
        self.numel, self.alive, self.peak, self.largest = numel, {}, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
                key = t.untyped_storage().data_ptr()  # a view (t(), a slice) shares its base's memory
                if t.numel() >= self.numel and key not in self.alive:
                    self.alive[key] = weakref.finalize(t, self.alive.pop, key, None)
                    self.peak = max(self.peak, len(self.alive))
        return out
