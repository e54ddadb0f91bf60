"""torchrun plumbing: which rank this process is, and sums over ranks.

Launch with ``torchrun --nproc_per_node=N -m canlib train ... --device cuda``; WORLD_SIZE > 1
turns on torch.distributed + DistributedDataParallel (NCCL on GPUs; the tests run 2 CPU ranks
over gloo; no multi-GPU run has been made).
"""

from __future__ import annotations

import os

import torch
from torch import Tensor


def dist_env() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun's environment; (0, 0, 1) otherwise."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def init_process_group(device: torch.device, world_size: int) -> None:
    """Join the torchrun group once (NCCL for CUDA, gloo for CPU)."""
    if world_size > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")


def all_sum(values: Tensor, world_size: int) -> Tensor:
    """Sum of ``values`` over ranks, on the device (no host round trip); ``values`` itself when alone."""
    if world_size == 1:
        return values
    values = values.clone()
    torch.distributed.all_reduce(values)
    return values


def barrier(world_size: int) -> None:
    if world_size > 1:
        torch.distributed.barrier()
