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

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from canlib.io import checked

# Adam's three implementations in PyTorch: the same update, dispatched as one fused operator, as a
# few multi-tensor (foreach) operators, or as about nine operators per parameter tensor (with a host read of each
# parameter's step count: on a GPU the launches, not the arithmetic, would set the pace)
OPTIMIZERS = ("fused", "foreach", "loop")
# scaled_dot_product_attention's kernels (torch.nn.attention.SDPBackend); "default" lets PyTorch choose per call
SDPA_BACKENDS = ("default", "math", "efficient", "flash", "cudnn", "planless")
PRECISIONS = ("fp32", "bf16", "fp16")
DROPOUT_RNGS = ("torch", "counter-hash")

# What a resumed run may change (``resume`` in each field's metadata):
#   "recipe": nothing; the run folder's value holds, and another one is refused
#   "stop":   when to stop; a resume may move it (to train longer)
#   "free":   what is shown, how often the newest state is saved, and the device it runs on: never the recipe
#             (another device computes the same updates, up to the last bits of its float sums)
#   "kernel": how an update is computed, not what it computes: the Python API warns that the last bits will
#             differ from an uninterrupted run's, the command line refuses like a recipe option


def option(
    default: Any,
    help: str,
    rule: str | None = None,
    group: str = "optimisation",
    resume: str = "recipe",
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A TrainConfig field with what the command line derives from it: its help, the rule its values obey
    (``canlib.io.RULES``), its group in ``--help``, what a resume may do with it, its choices."""
    meta = {"help": help, "rule": rule, "group": group, "resume": resume, "choices": choices}
    return field(default=default, metadata=meta)


@dataclass
class TrainConfig:
    """Optimisation and run settings (the paper's defaults); the ``canlib train`` options are derived from these
    fields (``canlib.training.cli``)."""

    lr: float = option(7e-4, "peak learning rate of the inverse-square-root schedule", "positive")
    warmup: int = option(8000, "linear warm-up updates to the peak (the paper's 8000 needs a long run)", "at least 1")
    betas: tuple[float, float] = option((0.9, 0.98), "Adam's two betas", "fraction")
    eps: float = option(1e-8, "Adam's epsilon", "positive")
    weight_decay: float = option(0.0, "Adam's L2 weight decay", "nonnegative")
    label_smoothing: float = option(0.1, "label smoothing of the loss", "fraction")
    max_tokens: int = option(4096, "tokens per micro-batch and device", "at least 1", "batches")
    update_freq: int = option(
        1, "micro-batches accumulated per update (8 on one GPU = the paper's 8x4096)", "at least 1", "batches"
    )
    clip_norm: float = option(0.0, "gradient norm clip; 0 = off (fairseq's default for this recipe)", "nonnegative")
    max_epochs: int = option(0, "stop after this many epochs; 0 = no limit", "nonnegative", "stopping", "stop")
    max_steps: int = option(0, "stop after this many updates; 0 = no limit", "nonnegative", "stopping", "stop")
    patience: int = option(
        0, "stop after this many validations without improvement; 0 = off", "nonnegative", "stopping"
    )
    eval_bleu: bool = option(
        False,
        "at every validation, also translate the first --eval-bleu-sentences validation sentences and score them "
        "with sacreBLEU: best.pt and --patience then follow BLEU (fairseq's --eval-bleu, Marian's --valid-metrics "
        "bleu; `canlib train` only)",
        None,
        "stopping",
    )
    eval_bleu_sentences: int = option(200, "validation sentences --eval-bleu translates", "at least 1", "stopping")
    eval_bleu_beam: int = option(1, "beam of --eval-bleu's translations (1: greedy)", "at least 1", "stopping")
    valid_every: int = option(
        0, "validate and checkpoint every K updates; 0 = at the end of every epoch", "nonnegative", "checkpoints"
    )
    save_every: int = option(
        0,
        "also save the newest state (checkpoints/last.pt) every N updates between validations; 0 = off",
        "nonnegative",
        "checkpoints",
        "free",
    )
    keep_last: int = option(5, "step checkpoints kept (best.pt is kept apart)", "at least 1", "checkpoints")
    average_last: int = option(
        5,
        "checkpoints averaged into average.pt (never one from inside the warm-up)",
        "nonnegative",
        "checkpoints",
    )
    seed: int = option(1, "seed of the initialisation, dropout and batch order", "nonnegative")
    dropout_rng: str = option(
        "torch",
        "dropout masks from torch's generator, or from a counter-based hash of (seed, update, site, element), "
        "which stacked seeds need (canlib.training.hash_dropout)",
        None,
        choices=DROPOUT_RNGS,
    )
    device: str = option("cpu", "cpu or cuda", None, "device", "free")
    precision: str = option("fp32", "fp32, or bf16 / fp16 on CUDA", None, "device", choices=PRECISIONS)
    log_every: int = option(
        100, "updates per log row (the host waits for the device only then)", "at least 1", "device", "free"
    )
    progress: bool = option(True, "a progress bar over the whole run", None, "device", "free")
    compile: bool = option(False, "torch.compile the model and loss", None, "device", "kernel")
    loss_chunk: int = option(
        4096, "target tokens per chunk of the output layer and loss; 0 = unchunked", "nonnegative", "device", "kernel"
    )
    optimizer: str = option(
        "fused",
        "Adam's implementation: fused (one operator per update), foreach, or loop (per tensor)",
        None,
        "device",
        "kernel",
        OPTIMIZERS,
    )
    # Throughput options, off by default; each changes the last bits of the numbers, none the recipe:
    pad_multiple: int = option(
        1,
        "shape buckets: padded lengths rounded up to a multiple of this (8 or 16 on a GPU); 1 = off",
        "at least 1",
        "throughput",
    )
    sdpa_backend: str = option(
        "default",
        "attention kernels while training (default: PyTorch picks per call; planless: any but cuDNN's, which "
        "plans each new batch shape)",
        None,
        "throughput",
        "kernel",
        SDPA_BACKENDS,
    )
    deterministic: bool = option(
        False,
        "deterministic kernels only: a resumed GPU run equals an uninterrupted one bit for bit",
        None,
        "throughput",
        "kernel",
    )
    loss_vocab_block: int = option(
        0,
        "vocabulary columns per tile of the chunked loss (online logsumexp); 0 = whole rows",
        "nonnegative",
        "throughput",
        "kernel",
    )

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        for f in fields(self):
            values = self.betas if f.name == "betas" else (getattr(self, f.name),)
            for value in values:
                problem = checked(value, f.metadata["rule"])
                if problem:
                    raise ValueError(f"{f.name}={getattr(self, f.name)}: {problem}")
            choices = f.metadata["choices"]
            if choices and getattr(self, f.name) not in choices:
                raise ValueError(f"{f.name}={getattr(self, f.name)!r}: choose {', '.join(choices)}")
        if self.loss_vocab_block and not self.loss_chunk:
            raise ValueError(
                f"loss_vocab_block={self.loss_vocab_block} needs loss_chunk > 0 (it tiles the chunked loss)"
            )
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


def resume_kind(name: str) -> str:
    """What a resume may do with TrainConfig field ``name`` ("recipe", "stop", "free" or "kernel": see above)."""
    return next(f.metadata["resume"] for f in fields(TrainConfig) if f.name == name)


def changed_fields(stored: dict[str, Any], now: TrainConfig) -> dict[str, tuple[Any, Any]]:
    """The fields whose value ``now`` differs from the ``stored`` config's (a run folder's): name -> (stored, now).
    Fields the stored config lacks (an older canlib) are left out."""
    new = now.to_dict()
    return {name: (stored[name], new[name]) for name in new if name in stored and stored[name] != new[name]}


# TrainConfig.optimizer -> Adam's flags: one fused operator per update (CPU and CUDA), a few
# multi-tensor operators, or about nine per parameter tensor plus a host read of its step count
ADAM_OPTIONS: dict[str, dict[str, bool | None]] = {
    "fused": {"fused": True, "foreach": None},
    "foreach": {"fused": None, "foreach": True},
    "loop": {"fused": None, "foreach": False},
}
