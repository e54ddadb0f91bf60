"""TrainConfig: the optimisation and run settings, defaulting to the paper's recipe.

The paper's Experimental Setup states:

* an inverse-square-root schedule with 8000 warm-up updates to a peak of 7e-4;
* 4096 tokens per GPU on 8 GPUs (``update_freq`` accumulates gradients to reach the same 8x4096 on fewer devices);
* mixed precision, and training until the model stops improving on the validation set;
* the average of the last 5 epochs' parameters.

Adam(0.9, 0.98, eps 1e-8) and label smoothing 0.1 are fairseq's Transformer recipe (the paper's codebase); the
paper does not state them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# Adam's three implementations in PyTorch: the same update, dispatched as one fused operator, as a
# few multi-tensor (foreach) operators, or as about nine operators per parameter tensor (with a host read of each
# parameter's step count: on a GPU the launches, not the arithmetic, would set the pace)
OPTIMIZERS = ("fused", "foreach", "loop")
# scaled_dot_product_attention's kernels (torch.nn.attention.SDPBackend); "default" lets PyTorch choose per call
SDPA_BACKENDS = ("default", "math", "efficient", "flash", "cudnn")


@dataclass
class TrainConfig:
    """Optimisation and run settings (the paper's defaults)."""

    lr: float = 7e-4
    warmup: int = 8000
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    max_tokens: int = 4096  # per device and micro-batch
    update_freq: int = 1  # micro-batches accumulated per update (8 on one GPU = the paper's 8x4096)
    clip_norm: float = 0.0  # 0 = no gradient clipping (fairseq's default for this recipe)
    max_epochs: int = 0  # 0 = no limit
    max_steps: int = 0  # 0 = no limit
    patience: int = 0  # stop after this many validations without improvement; 0 = off
    valid_every: int = 0  # validate (and checkpoint) every K updates; 0 = at the end of every epoch
    keep_last: int = 5  # step checkpoints kept (best.pt is kept apart)
    average_last: int = 5  # checkpoints averaged into average.pt
    seed: int = 1
    device: str = "cpu"
    precision: str = "fp32"  # fp32 | bf16 | fp16 (the last two on CUDA)
    log_every: int = 100  # also how often the host waits for the device (losses are summed on it)
    progress: bool = True  # tqdm bar
    compile: bool = False  # torch.compile the model and loss (the first updates of each new shape compile)
    loss_chunk: int = 4096  # target tokens per chunk of the output layer + loss; 0 = one (tokens x V) log-softmax
    optimizer: str = "fused"  # Adam's implementation: fused (one operator per update, CPU and CUDA) | foreach | loop
    # Throughput options, off by default; each changes the last bits of the numbers, none the recipe:
    pad_multiple: int = 1  # shape buckets: padded lengths rounded up to a multiple of this (8 or 16 on a GPU); 1 = off
    sdpa_backend: str = "default"  # attention kernels while training: default | math | efficient | flash | cudnn
    deterministic: bool = (
        False  # deterministic kernels only: bit-exact resume on a GPU, compiled too (training/kernels.py)
    )
    loss_vocab_block: int = 0  # vocabulary columns per tile of the chunked loss (online logsumexp); 0 = whole rows

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        if self.lr <= 0:
            raise ValueError(f"lr={self.lr}: must be positive")
        if self.warmup < 1:
            raise ValueError(f"warmup={self.warmup}: must be >= 1 (the schedule is lr*min(n/warmup, sqrt(warmup/n)))")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing={self.label_smoothing}: must be in [0, 1)")
        for name in ("max_tokens", "update_freq", "log_every", "pad_multiple"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= 1")
        for name in (
            "clip_norm",
            "max_epochs",
            "max_steps",
            "patience",
            "valid_every",
            "keep_last",
            "average_last",
            "loss_chunk",
            "loss_vocab_block",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= 0")
        if self.keep_last < 1:
            raise ValueError(f"keep_last={self.keep_last}: must keep at least one checkpoint to resume from")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r}: choose {', '.join(OPTIMIZERS)}")
        if self.sdpa_backend not in SDPA_BACKENDS:
            raise ValueError(f"sdpa_backend={self.sdpa_backend!r}: choose {', '.join(SDPA_BACKENDS)}")
        if self.loss_vocab_block and not self.loss_chunk:
            raise ValueError(
                f"loss_vocab_block={self.loss_vocab_block} needs loss_chunk > 0 (it tiles the chunked loss)"
            )
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision={self.precision!r}: choose fp32, bf16 or fp16")
        if self.precision != "fp32" and not self.device.startswith("cuda"):
            raise ValueError(f"precision={self.precision} needs device=cuda (CPU training runs in fp32)")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["betas"] = list(self.betas)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a stored config; keys this version does not know are ignored, missing ones default."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# TrainConfig.optimizer -> Adam's flags: one fused operator per update (CPU and CUDA), a few
# multi-tensor operators, or about nine per parameter tensor plus a host read of its step count
ADAM_OPTIONS: dict[str, dict[str, bool | None]] = {
    "fused": {"fused": True, "foreach": None},
    "foreach": {"fused": None, "foreach": True},
    "loop": {"fused": None, "foreach": False},
}
