"""Operators dispatched by a piece of PyTorch code, counted on any device (a CPU will do).

At batch 1 on a GPU each kernel launch costs microseconds whatever its size, so the number of operators a
decoding step or a training update dispatches is the paper's speed argument made countable without a GPU.
:class:`OpCounter` records every ATen operator that reaches the dispatcher below autograd; views and
metadata-only operators launch no kernel, so they are counted apart, and a host synchronisation (a device
value read by Python: ``.item()``, ``.tolist()``, ``bool(tensor)``) is counted as its ``_local_scalar_dense``.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# operators that only describe memory (no kernel on a GPU)
_NO_KERNEL = {"aten.view", "aten._unsafe_view", "aten.reshape", "aten.expand", "aten.permute", "aten.transpose",
              "aten.t", "aten.unsqueeze", "aten.squeeze", "aten.slice", "aten.select", "aten.as_strided",
              "aten.alias", "aten.detach", "aten.split", "aten.split_with_sizes", "aten.unbind", "aten.chunk",
              "aten.narrow", "aten.diagonal", "aten.unflatten", "aten.flatten", "aten.lift_fresh",
              "aten._reshape_alias", "aten.sym_size", "aten.sym_stride", "aten.sym_numel", "aten.is_same_size",
              "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided",
              "aten.set_", "aten._local_scalar_dense"}
HOST_SYNC = "aten._local_scalar_dense"


class OpCounter(TorchDispatchMode):
    """``with OpCounter() as ops: step()`` then ``ops.total``, ``ops.kernels`` (operators that launch a
    kernel: views, allocations and host reads excluded), ``ops.host_syncs`` and ``ops.by_name``."""

    def __init__(self) -> None:
        super().__init__()
        self.by_name: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.by_name[str(func.overloadpacket).replace("aten::", "aten.")] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.by_name.values())

    @property
    def kernels(self) -> int:
        return sum(n for name, n in self.by_name.items() if name not in _NO_KERNEL)

    @property
    def host_syncs(self) -> int:
        return self.by_name[HOST_SYNC]

    def summary(self) -> dict[str, Any]:
        """The counts as plain data (for a stored result)."""
        return {"operators": self.total, "kernel_operators": self.kernels, "host_syncs": self.host_syncs,
                "by_name": dict(self.by_name.most_common())}
