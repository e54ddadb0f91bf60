"""The trainer: the paper's recipe (fairseq's transformer recipe), resumable bit for bit.

Recipe (paper, Experimental Setup): Adam(0.9, 0.98, eps 1e-8), inverse-square-root
schedule with 8000 warmup updates to a peak of 7e-4, label smoothing 0.1, dropout
from the model preset, 4096 tokens per GPU on 8 GPUs (``update_freq`` accumulates
gradients to reach the same 8x4096 on fewer devices), mixed precision, early stopping
on the validation set and the average of the last 5 epoch checkpoints.

Learning rate of update n (n = 1, 2, ...)::

    lr(n) = lr * min(n / warmup, sqrt(warmup / n))

linear warm-up to ``lr`` at n = warmup, then proportional to 1/sqrt(n) (fairseq's
``inverse_sqrt`` with warmup_init_lr = 0).

A checkpoint holds everything the next update depends on (weights, Adam moments,
schedule, grad scaler, step, epoch, sampler position, every RNG), so a run killed
at any moment and resumed from its last checkpoint retraces the same updates:
on CPU the final parameters are bit-identical to an uninterrupted run's.

Multi-GPU: launch with ``torchrun --nproc_per_node=N -m canlib train ... --device cuda``;
WORLD_SIZE > 1 turns on torch.distributed + DistributedDataParallel (NCCL on GPUs;
tests run 2 CPU ranks over gloo; no multi-GPU run has been made).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from canlib.data.batching import Split, TokenBatchSampler, collate, sorted_batches
from canlib.model.checkpoint import CheckpointError, atomic_save, model_payload, safe_load, save_model
from canlib.model.config import ModelConfig, preset
from canlib.model.seq2seq import Seq2Seq
from canlib.io import atomic_write_bytes, origin

CKPT_RE = re.compile(r"^step_(\d{7,})\.pt$")


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
    log_every: int = 100
    progress: bool = True  # tqdm bar

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        if self.lr <= 0:
            raise ValueError(f"lr={self.lr}: must be positive")
        if self.warmup < 1:
            raise ValueError(f"warmup={self.warmup}: must be >= 1 (the schedule is lr*min(n/warmup, sqrt(warmup/n)))")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing={self.label_smoothing}: must be in [0, 1)")
        for name in ("max_tokens", "update_freq", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= 1")
        for name in ("clip_norm", "max_epochs", "max_steps", "patience", "valid_every", "keep_last", "average_last"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= 0")
        if self.keep_last < 1:
            raise ValueError(f"keep_last={self.keep_last}: must keep at least one checkpoint to resume from")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision={self.precision!r}: choose fp32, bf16 or fp16")
        if self.precision != "fp32" and not self.device.startswith("cuda"):
            raise ValueError(f"precision={self.precision} needs device=cuda (CPU training runs in fp32)")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["betas"] = list(self.betas)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the run stops before saving anything."""


def inverse_sqrt_lr(update: int, lr: float, warmup: int) -> float:
    """lr(n) = lr * min(n / warmup, sqrt(warmup / n)) for update n >= 1."""
    n = max(update, 1)
    return lr * min(n / warmup, math.sqrt(warmup / n))


def label_smoothed_nll_loss(log_probs: Tensor, target: Tensor, epsilon: float, ignore_index: int) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL over non-padding targets.

    fairseq's definition (label_smoothed_cross_entropy, as of the paper)::

        loss = (1 - eps) * nll + eps / V * sum_v -log p(v)

    i.e. cross-entropy against (1 - eps) * onehot + eps / V * uniform, which is what
    ``F.cross_entropy(label_smoothing=eps)`` computes on log-probs (tests pin this).
    """
    lp = log_probs.reshape(-1, log_probs.size(-1))
    tgt = target.reshape(-1)
    keep = tgt.ne(ignore_index)
    nll = -lp.gather(-1, tgt.clamp(min=0)[:, None]).squeeze(-1)
    smooth = -lp.sum(-1)
    loss = (1.0 - epsilon) * nll + (epsilon / lp.size(-1)) * smooth
    return loss.masked_fill(~keep, 0.0).sum(), nll.masked_fill(~keep, 0.0).sum()


def average_checkpoints(paths: Sequence[str | os.PathLike]) -> dict[str, Tensor]:
    """Element-wise mean of the model weights in ``paths`` (accumulated in float64)."""
    if not paths:
        raise ValueError("average_checkpoints: no checkpoint paths given")
    first: dict[str, Tensor] = {}
    total: dict[str, Tensor] = {}
    for path in paths:
        state = safe_load(path)
        if "model" not in state:
            raise CheckpointError(f"{path}: no 'model' weights in this checkpoint")
        weights = state["model"]
        if first and set(weights) != set(first):
            raise CheckpointError(f"{path}: its parameter names differ from {paths[0]}'s")
        for name, value in weights.items():
            ref = first.setdefault(name, value)
            if ref.shape != value.shape:
                raise CheckpointError(f"{path}: {name} has shape {tuple(value.shape)}, {paths[0]} has {tuple(ref.shape)}")
            if value.is_floating_point():
                total[name] = total[name] + value.double() if name in total else value.double()
    return {name: (total[name] / len(paths)).to(ref.dtype) if name in total else ref for name, ref in first.items()}


# -- RNG state as tensors (loadable with weights_only=True) ----------------------------
def rng_state() -> dict[str, Any]:
    version, internal, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state(("MT19937", npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["cached"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# -- distributed --------------------------------------------------------------------------
def dist_env() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun's environment; (0, 0, 1) otherwise."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def _all_sum(values: list[float], device: torch.device, world_size: int) -> list[float]:
    if world_size == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(t)
    return t.tolist()


class Trainer:
    """Trains one model on one split and writes a run directory (see ``canlib/train.py`` docstring).

    ``valid_bleu(model) -> float``, if given, is called at every validation on the raw
    (unwrapped, eval-mode) model; then BLEU (higher is better) drives early stopping and
    best.pt instead of the validation loss.
    """

    def __init__(
        self,
        model_cfg: ModelConfig,
        cfg: TrainConfig,
        train_split: Split,
        valid_split: Split | None,
        run_dir: str | os.PathLike,
        vocab: Any = None,
        valid_bleu: Callable[[Seq2Seq], float] | None = None,
        data_path: str | None = None,
        resume: bool = False,
        overwrite: bool = False,
        init_weights: dict[str, Tensor] | None = None,
    ) -> None:
        self.model_cfg, self.cfg = model_cfg, cfg
        self.train_split, self.valid_split = train_split, valid_split
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.vocab, self.valid_bleu, self.data_path = vocab, valid_bleu, data_path
        self.vocab_id = getattr(vocab, "id", None)
        self.rank, self.local_rank, self.world_size = dist_env()
        self.is_main = self.rank == 0

        self._check_data()
        self.device = self._setup_device()
        resume_from = self._prepare_run_dir(resume, overwrite)

        seed_everything(cfg.seed)
        self.model = Seq2Seq(model_cfg).to(self.device)
        if init_weights is not None:  # fine-tuning: start from given weights instead of a fresh init
            self.model.load_state_dict(init_weights)
        if self.rank:
            seed_everything(cfg.seed + self.rank)  # different dropout masks per rank
        self.ddp = self.model
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp = DistributedDataParallel(self.model, device_ids=ids)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda done: inverse_sqrt_lr(done + 1, 1.0, cfg.warmup)
        )
        self.scaler = torch.amp.GradScaler("cuda", enabled=cfg.precision == "fp16")
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
        self.sampler = TokenBatchSampler(
            train_split.src_lens, train_split.tgt_lens, cfg.max_tokens, seed=cfg.seed,
            rank=self.rank, world_size=self.world_size,
        )
        if len(self.sampler) == 0:
            raise ValueError(f"the training split{self._data_name()} makes fewer batches than world_size={self.world_size}")
        self.step, self.epoch, self.wall = 0, 0, 0.0
        self.best: dict[str, Any] = {"metric": None, "step": None, "bad": 0}
        self.last_valid: dict[str, Any] = {}
        if resume_from is not None:
            self._load(resume_from)
        elif self.is_main:
            self._write_run_files()

    # -- setup -----------------------------------------------------------------------------
    def _check_data(self) -> None:
        if len(self.train_split) == 0:
            raise ValueError(f"the training split{self._data_name()} is empty: nothing to train on")
        if self.vocab is not None and self.vocab.size != self.model_cfg.vocab_size:
            raise ValueError(
                f"vocabulary {self.vocab_id} has {self.vocab.size} pieces but the model config has "
                f"vocab_size={self.model_cfg.vocab_size}; build the preset with vocab_size={self.vocab.size}"
            )

    def _data_name(self) -> str:
        return f" of {self.data_path}" if self.data_path else ""

    def _setup_device(self) -> torch.device:
        dev = torch.device(self.cfg.device)
        if dev.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError("device=cuda requested but torch sees no CUDA GPU (use --device cpu)")
            dev = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(dev)
            if self.cfg.precision == "bf16" and not torch.cuda.is_bf16_supported():
                raise ValueError(f"precision=bf16 is not supported on {torch.cuda.get_device_name(dev)}; use fp16")
        if self.world_size > 1 and not torch.distributed.is_initialized():
            torch.distributed.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        return dev

    def _prepare_run_dir(self, resume: bool, overwrite: bool) -> Path | None:
        """Refuse to clobber another run; on resume, return the newest readable checkpoint."""
        if resume and overwrite:
            raise ValueError("choose either resume or overwrite, not both")
        existing = self.checkpoints()
        if existing and not (resume or overwrite):
            raise ValueError(
                f"{self.run_dir} already holds another run's checkpoints ({existing[-1].name}, {len(existing)} in all); "
                f"pass --resume to continue it or --overwrite to start over"
            )
        if overwrite and self.is_main:
            shutil.rmtree(self.ckpt_dir, ignore_errors=True)
            for name in ("log.jsonl", "average.pt", "result.json", "config.json", "vocab.model"):
                (self.run_dir / name).unlink(missing_ok=True)
        if self.world_size > 1:
            torch.distributed.barrier()
        if not resume or not existing:
            return None
        config_file = self.run_dir / "config.json"
        if config_file.is_file():
            stored = json.loads(config_file.read_text())
            if stored.get("model") != self.model_cfg.to_dict():
                diff = {k: (v, self.model_cfg.to_dict().get(k)) for k, v in stored.get("model", {}).items() if self.model_cfg.to_dict().get(k) != v}
                raise ValueError(f"{config_file}: the run was trained with another model config (field: (run, now)) {diff}")
            if self.vocab_id is not None and stored.get("vocab_id") not in (None, self.vocab_id):
                raise ValueError(f"{config_file}: the run used vocabulary {stored.get('vocab_id')}, the corpus given has {self.vocab_id}")
        for path in reversed(existing):
            try:
                safe_load(path)
                return path
            except CheckpointError as exc:
                warnings.warn(f"skipping unreadable checkpoint: {exc}")
        raise CheckpointError(f"{self.ckpt_dir}: no readable checkpoint to resume from")

    def _write_run_files(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "model": self.model_cfg.to_dict(), "train": self.cfg.to_dict(), "data": self.data_path,
            "vocab_id": self.vocab_id, "world_size": self.world_size,
        }
        atomic_write_bytes((json.dumps(config, indent=1) + "\n").encode(), self.run_dir / "config.json")
        if self.vocab is not None:
            self.vocab.save(self.run_dir / "vocab.model")
        (self.run_dir / "log.jsonl").write_text("")  # a fresh run starts a fresh log

    def checkpoints(self) -> list[Path]:
        """Step checkpoints of this run, oldest first."""
        if not self.ckpt_dir.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.ckpt_dir.iterdir() if (m := CKPT_RE.match(p.name))]
        return [p for _, p in sorted(found)]

    # -- checkpoints -------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        rngs = [rng_state()]
        if self.world_size > 1:
            gathered: list[Any] = [None] * self.world_size
            torch.distributed.all_gather_object(gathered, rngs[0])
            rngs = gathered
        return {
            **model_payload(self.model, self.vocab_id),
            "train_config": self.cfg.to_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "wall": self.wall,
            "sampler": self.sampler.state_dict(),
            "rng": rngs,
            "best": dict(self.best),
            "valid": dict(self.last_valid),
        }

    def save_checkpoint(self, is_best: bool) -> Path:
        """Write step_XXXXXXX.pt atomically, link best.pt to it if best, prune old ones."""
        state = self._state()  # collective when distributed: every rank builds it
        path = self.ckpt_dir / f"step_{self.step:07d}.pt"
        if self.is_main:
            atomic_save(state, path)
            if is_best:
                self._link_best(path)
            self._prune()
        if self.world_size > 1:
            torch.distributed.barrier()
        return path

    def _link_best(self, path: Path) -> None:
        """best.pt = the same file as ``path`` (a hard link: no second copy on disk), replaced atomically."""
        tmp = self.ckpt_dir / ".best.pt.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.link(path, tmp)
        except OSError:
            shutil.copyfile(path, tmp)
        os.replace(tmp, self.ckpt_dir / "best.pt")

    def _prune(self) -> None:
        """Keep the newest ``keep_last`` step checkpoints, and always the best one."""
        best_step = self.best["step"]
        for path in self.checkpoints()[: -self.cfg.keep_last]:
            if best_step is None or path.name != f"step_{best_step:07d}.pt":
                path.unlink(missing_ok=True)

    def _load(self, path: Path) -> None:
        state = safe_load(path)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step, self.epoch, self.wall = int(state["step"]), int(state["epoch"]), float(state["wall"])
        self.best, self.last_valid = dict(state["best"]), dict(state["valid"])
        rngs = state["rng"]
        if len(rngs) == self.world_size:
            set_rng_state(rngs[self.rank])
        else:
            warnings.warn(f"{path}: saved by {len(rngs)} rank(s), resumed on {self.world_size}; RNG streams are reseeded")
            seed_everything(self.cfg.seed + self.rank + self.step)
        if self.is_main:
            self._truncate_log()
            print(f"resumed from {path} (step {self.step}, epoch {self.epoch})", file=sys.stderr)

    def _truncate_log(self) -> None:
        """Drop log lines written after the checkpoint we resume from (the replayed steps log again),
        and a last line a kill cut short."""
        log = self.run_dir / "log.jsonl"
        if log.is_file():
            kept = []
            for line in log.read_text().splitlines():
                try:
                    if json.loads(line)["step"] <= self.step:
                        kept.append(line)
                except (json.JSONDecodeError, KeyError, TypeError):
                    pass  # a line cut short by the kill
            atomic_write_bytes("".join(r + "\n" for r in kept).encode(), log)

    def _log(self, row: dict[str, Any]) -> None:
        if self.is_main:
            with open(self.run_dir / "log.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")

    # -- training ------------------------------------------------------------------------------
    def _batch_to_device(self, indices: list[int], split: Split, name: str) -> dict[str, Any]:
        cfg = self.model_cfg
        batch = collate(split, indices, cfg.pad_id, cfg.bos_id, cfg.eos_id)
        for key in ("src", "tgt_out"):
            t = batch[key]
            bad = (t < 0) | (t >= cfg.vocab_size)
            if bool(bad.any()):
                row = int(bad.any(dim=1).nonzero()[0])
                value = int(t[row][bad[row]][0])
                side = "source" if key == "src" else "target"
                raise ValueError(
                    f"example {indices[row]} of the {name} split{self._data_name()} has {side} token id {value}, outside "
                    f"[0, vocab_size={cfg.vocab_size}): the corpus was tokenized with another vocabulary"
                )
        for key in ("src", "tgt_in", "tgt_out"):
            batch[key] = batch[key].to(self.device, non_blocking=True)
        return batch

    def _autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def _update(self, group: list[list[int]]) -> tuple[float, float, int]:
        """One optimizer update over ``group`` micro-batches; returns (loss sum, nll sum, target tokens)."""
        self.ddp.train()
        batches = [self._batch_to_device(b, self.train_split, "train") for b in group]
        local_tokens = sum(b["ntokens"] for b in batches)
        (global_tokens,) = _all_sum([float(local_tokens)], self.device, self.world_size)
        # DDP averages gradients over ranks; scaling by world_size/global_tokens makes the
        # update the per-token mean over the whole effective batch (fairseq's normalisation).
        scale = self.world_size / global_tokens
        loss_sum = nll_sum = 0.0
        for i, batch in enumerate(batches):
            sync = i == len(batches) - 1 or self.world_size == 1
            with (nullcontext() if sync else self.ddp.no_sync()), self._autocast():
                logp = self.ddp(batch["src"], batch["tgt_in"])
                loss, nll = label_smoothed_nll_loss(logp, batch["tgt_out"], self.cfg.label_smoothing, self.model_cfg.pad_id)
            self.scaler.scale(loss * scale).backward()
            loss_sum += float(loss.detach())
            nll_sum += float(nll.detach())
        loss_sum, nll_sum = _all_sum([loss_sum, nll_sum], self.device, self.world_size)
        if not math.isfinite(loss_sum):
            raise NonFiniteLossError(
                f"training loss is {loss_sum} at step {self.step + 1} (epoch {self.epoch + 1}); "
                f"stopped without saving; the last good checkpoint is {self._last_ckpt_name()}"
            )
        if self.cfg.clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        return loss_sum, nll_sum, int(global_tokens)

    def _last_ckpt_name(self) -> str:
        found = self.checkpoints()
        return str(found[-1]) if found else "none (no checkpoint written yet)"

    @torch.no_grad()
    def validate(self) -> dict[str, Any]:
        """Label-smoothed loss and NLL per target token on the validation split (+ BLEU if a hook is given)."""
        out: dict[str, Any] = {}
        if self.valid_split is not None and len(self.valid_split):
            self.model.eval()
            batches = sorted_batches(self.valid_split, self.cfg.max_tokens)
            loss_sum = nll_sum = tokens = 0.0
            for indices in batches[self.rank :: self.world_size]:
                batch = self._batch_to_device(indices.tolist(), self.valid_split, "valid")
                with self._autocast():
                    logp = self.model(batch["src"], batch["tgt_in"])
                    loss, nll = label_smoothed_nll_loss(logp, batch["tgt_out"], self.cfg.label_smoothing, self.model_cfg.pad_id)
                loss_sum, nll_sum, tokens = loss_sum + float(loss), nll_sum + float(nll), tokens + batch["ntokens"]
            loss_sum, nll_sum, tokens = _all_sum([loss_sum, nll_sum, tokens], self.device, self.world_size)
            out = {"valid_loss": loss_sum / tokens, "valid_nll": nll_sum / tokens}
        if self.valid_bleu is not None:
            self.model.eval()
            bleu = [float(self.valid_bleu(self.model)) if self.is_main else 0.0]
            if self.world_size > 1:
                torch.distributed.broadcast_object_list(bleu, src=0)
            out["valid_bleu"] = bleu[0]
        self.model.train()
        return out

    def _validate_and_checkpoint(self) -> bool:
        """Validate, update best/patience, checkpoint; True when early stopping says stop."""
        self.last_valid = self.validate()
        metric, higher = (
            (self.last_valid.get("valid_bleu"), True) if "valid_bleu" in self.last_valid else (self.last_valid.get("valid_loss"), False)
        )
        is_best = False
        if metric is not None:
            best = self.best["metric"]
            is_best = best is None or (metric > best if higher else metric < best)
            if is_best:
                self.best = {"metric": metric, "step": self.step, "bad": 0}
            else:
                self.best["bad"] += 1
        self._log({"kind": "valid", "step": self.step, "epoch": self.epoch, **self.last_valid,
                   "best": self.best["metric"], "wall": round(self.wall, 3)})
        self.save_checkpoint(is_best)
        return bool(self.cfg.patience and self.best["bad"] >= self.cfg.patience)

    def _done(self) -> bool:
        return bool((self.cfg.max_steps and self.step >= self.cfg.max_steps) or (self.cfg.max_epochs and self.epoch >= self.cfg.max_epochs))

    def fit(self) -> dict[str, Any]:
        """Train until max_steps / max_epochs / early stopping; write average.pt and result.json."""
        cfg = self.cfg
        if not (cfg.max_steps or cfg.max_epochs or cfg.patience):
            raise ValueError("set max_steps, max_epochs or patience: otherwise training never stops")
        if cfg.patience and self.valid_split is None and self.valid_bleu is None:
            raise ValueError(f"patience={cfg.patience} needs a validation split or a valid_bleu hook to watch")
        stop_reason = "max_steps" if cfg.max_steps and self.step >= cfg.max_steps else None
        interval = {"loss": 0.0, "nll": 0.0, "tokens": 0, "steps": 0, "time": 0.0}
        while stop_reason is None and not self._done():
            if self.sampler.epoch != self.epoch:
                self.sampler.set_epoch(self.epoch)
            steps_in_epoch = math.ceil(len(self.sampler) / cfg.update_freq)
            bar = tqdm(
                total=steps_in_epoch, initial=math.ceil(self.sampler.position / cfg.update_freq), desc=f"epoch {self.epoch + 1}",
                unit="upd", disable=not (cfg.progress and self.is_main), leave=False, dynamic_ncols=True,
            )
            group: list[list[int]] = []
            batches = iter(self.sampler)
            while True:
                indices = next(batches, None)
                if indices is not None:
                    group.append(indices)
                    if len(group) < cfg.update_freq:
                        continue
                if not group:
                    break
                tic = time.perf_counter()
                loss, nll, tokens = self._update(group)
                group = []
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                elapsed = time.perf_counter() - tic
                self.wall += elapsed
                for k, v in (("loss", loss), ("nll", nll), ("tokens", tokens), ("steps", 1), ("time", elapsed)):
                    interval[k] += v
                bar.update(1)
                if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
                    self._log_interval(interval, bar)
                if cfg.valid_every and self.step % cfg.valid_every == 0:
                    if self._validate_and_checkpoint():
                        stop_reason = "early_stopping"
                        break
                if cfg.max_steps and self.step >= cfg.max_steps:
                    stop_reason = "max_steps"
                    break
            bar.close()
            if stop_reason == "early_stopping":
                break
            if indices is None:  # the epoch ran to its end
                self.epoch += 1
                self.sampler.set_epoch(self.epoch)
                if interval["steps"]:
                    self._log_interval(interval, None)
                if not cfg.valid_every and self._validate_and_checkpoint():
                    stop_reason = "early_stopping"
                    break
            if stop_reason == "max_steps":
                break
        if stop_reason is None:
            stop_reason = "max_epochs" if cfg.max_epochs and self.epoch >= cfg.max_epochs else "max_steps"
        if interval["steps"]:
            self._log_interval(interval, None)
        last = self.checkpoints()
        if not last or last[-1].name != f"step_{self.step:07d}.pt":
            self._validate_and_checkpoint()
        return self._finish(stop_reason)

    def _log_interval(self, interval: dict[str, float], bar: tqdm | None) -> None:
        """One train row: means over the updates since the last row; target tokens and their rate;
        ``wall`` = seconds spent in updates so far (validation and checkpoints excluded, kept across resumes)."""
        row = {
            "kind": "train", "step": self.step, "epoch": self.epoch,
            "train_loss": interval["loss"] / interval["tokens"], "train_nll": interval["nll"] / interval["tokens"],
            "lr": self.optimizer.param_groups[0]["lr"], "tokens": interval["tokens"],
            "tokens_per_sec": interval["tokens"] / max(interval["time"], 1e-9),
            "wall": round(self.wall, 3),
        }
        self._log(row)
        if bar is not None:
            bar.set_postfix(loss=f"{row['train_loss']:.3f}", lr=f"{row['lr']:.2e}", tok_s=f"{row['tokens_per_sec']:.0f}")
        for k in interval:
            interval[k] = 0

    def _finish(self, stop_reason: str) -> dict[str, Any]:
        """Average the last checkpoints into average.pt and write result.json."""
        result: dict[str, Any] = {}
        if self.is_main:
            # the newest keep_last files are consecutive; an older best.pt twin kept by _prune is not averaged
            recent = self.checkpoints()[-self.cfg.keep_last :]
            chosen = recent[-max(self.cfg.average_last, 1) :]
            averaged = average_checkpoints(chosen)
            model = Seq2Seq(self.model_cfg)
            model.load_state_dict(averaged)
            save_model(model, self.run_dir / "average.pt", vocab_id=self.vocab_id, averaged=[p.name for p in chosen])
            result = {
                "stop_reason": stop_reason, "step": self.step, "epoch": self.epoch, "wall_s": round(self.wall, 3),
                "best": self.best, "last_valid": self.last_valid, "averaged": [p.name for p in chosen],
                "params": self.model.num_parameters(), "provenance": origin(self.device),
                "config": {"model": self.model_cfg.to_dict(), "train": self.cfg.to_dict(), "data": self.data_path, "vocab_id": self.vocab_id},
            }
            atomic_write_bytes((json.dumps(result, indent=1) + "\n").encode(), self.run_dir / "result.json")
        if self.world_size > 1:
            torch.distributed.barrier()
        return result


# -- CLI ------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    parser.add_argument("--preset", required=True, help="model preset, e.g. tiny-can, can, balanced (see `canlib info`)")
    parser.add_argument("--data", required=True, help="prepared corpus directory (canlib.data.prepare)")
    parser.add_argument("--out", required=True, help="run directory to write")
    parser.add_argument("--max-tokens", type=int, default=d.max_tokens, help="tokens per micro-batch and device (default 4096)")
    parser.add_argument("--update-freq", type=int, default=d.update_freq, help="micro-batches per update (8 on 1 GPU = paper's 8x4096)")
    parser.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default 7e-4)")
    parser.add_argument("--warmup", type=int, default=d.warmup, help="linear warm-up updates (default 8000)")
    parser.add_argument("--label-smoothing", type=float, default=d.label_smoothing)
    parser.add_argument("--clip-norm", type=float, default=d.clip_norm, help="gradient norm clip; 0 = off")
    parser.add_argument("--dropout", type=float, default=None, help="override the preset's dropout (all three rates)")
    stop = parser.add_argument_group("stopping")
    stop.add_argument("--max-epochs", type=int, default=d.max_epochs)
    stop.add_argument("--max-steps", type=int, default=d.max_steps)
    stop.add_argument("--patience", type=int, default=d.patience, help="validations without improvement before stopping; 0 = off")
    parser.add_argument("--valid-every", type=int, default=d.valid_every, help="validate every K updates; 0 = every epoch")
    parser.add_argument("--keep-last", type=int, default=d.keep_last)
    parser.add_argument("--average-last", type=int, default=d.average_last)
    parser.add_argument("--log-every", type=int, default=d.log_every)
    parser.add_argument("--device", default=d.device, help="cpu or cuda")
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default=None, help="default: bf16 on cuda, fp32 on cpu")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    mode.add_argument("--overwrite", action="store_true", help="delete the run in --out and start over")


def run(args: argparse.Namespace) -> int:
    from canlib.data import load_prepared  # the data pipeline is only needed by the CLI

    corpus = load_prepared(args.data)
    overrides = {} if args.dropout is None else dict(dropout=args.dropout, attn_dropout=args.dropout, relu_dropout=args.dropout)
    model_cfg = preset(args.preset, vocab_size=corpus.vocab.size, **overrides)
    precision = args.precision or ("bf16" if args.device.startswith("cuda") else "fp32")
    cfg = TrainConfig(
        lr=args.lr, warmup=args.warmup, label_smoothing=args.label_smoothing, max_tokens=args.max_tokens,
        update_freq=args.update_freq, clip_norm=args.clip_norm, max_epochs=args.max_epochs, max_steps=args.max_steps,
        patience=args.patience, valid_every=args.valid_every, keep_last=args.keep_last, average_last=args.average_last,
        seed=args.seed, device=args.device, precision=precision, log_every=args.log_every, progress=not args.no_progress,
    )
    trainer = Trainer(
        model_cfg, cfg, corpus.split("train"), corpus.split("valid"), args.out, vocab=corpus.vocab,
        data_path=str(Path(args.data).resolve()), resume=args.resume, overwrite=args.overwrite,
    )
    result = trainer.fit()
    if trainer.is_main:
        print(json.dumps({k: result[k] for k in ("stop_reason", "step", "epoch", "best", "last_valid")}))
    return 0
