"""Which kernels an update may use: the attention backend and deterministic algorithms (TrainConfig's
``sdpa_backend`` and ``deterministic``), entered around every update and validation and restored after.

Why: on a GPU, cuDNN's attention builds a plan for every new batch shape (milliseconds of host time each)
and its backward is not deterministic, so a resumed run drifts from an uninterrupted one in the last
bits. With ``deterministic`` PyTorch refuses operators that have no deterministic kernel and never picks
cuDNN's attention (the memory-efficient and flash kernels then run their deterministic backward), and
torch.compile's Inductor benchmarks no kernel variants (a benchmark's pick could differ between a run
and its resumption). One operator of canlib's models has no deterministic CUDA kernel: AAN's cumulative
average (``torch.cumsum``), for which PyTorch raises. ``sdpa_backend`` pins one attention family, or
(``planless``) leaves out cuDNN's. On a CPU both change nothing but the kernel PyTorch picks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

# TrainConfig.sdpa_backend -> the kernel families scaled_dot_product_attention may use ("planless": every family
# but cuDNN's, which builds a plan for each new batch shape: 18-38 s of a small run's first epoch on an H200)
SDPA_KERNELS = {
    "math": [SDPBackend.MATH],
    "efficient": [SDPBackend.EFFICIENT_ATTENTION],
    "flash": [SDPBackend.FLASH_ATTENTION],
    "cudnn": [SDPBackend.CUDNN_ATTENTION],
    "planless": [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH],
}


@contextmanager
def deterministic_algorithms() -> Iterator[None]:
    """Deterministic kernels only, without filling fresh memory (what the code reads it writes first);
    the process's settings are restored afterwards."""
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
    )
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.utils.deterministic.fill_uninitialized_memory = before[2]


def kernel_choices(sdpa_backend: str, deterministic: bool) -> ExitStack:
    """A context with the chosen attention backend ("default": PyTorch picks per call) and, if asked,
    deterministic algorithms."""
    stack = ExitStack()
    if sdpa_backend != "default":
        stack.enter_context(sdpa_kernel(SDPA_KERNELS[sdpa_backend]))
    if deterministic:
        stack.enter_context(deterministic_algorithms())
    return stack


def setup_device(device: str, local_rank: int, precision: str, deterministic: bool) -> torch.device:
    """The device a training process runs on (this process's GPU under torchrun), refused in one line where it
    cannot run the recipe's precision."""
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device=cuda requested but torch sees no CUDA GPU (use --device cpu)")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        if precision == "bf16" and not torch.cuda.is_bf16_supported():
            raise ValueError(f"precision=bf16 is not supported on {torch.cuda.get_device_name(dev)}; use fp16")
        if deterministic:  # cuBLAS's deterministic workspace, read before its first product in the process
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return dev
