"""The Trainer: the paper's recipe on one split, writing a resumable run directory.

Run directory: ``config.json``, ``vocab.model``, ``log.jsonl`` (one JSON row per log point
and per validation), ``checkpoints/step_XXXXXXX.pt`` (the newest ``keep_last`` and the best,
``best.pt`` a hard link to it; ``last.pt``, the newest state saved between validations by ``save_every`` or a stop
signal), ``average.pt`` (the mean of the last ``average_last``, none from inside the warm-up) and ``result.json``.
Resuming retraces the same updates (see ``canlib.training.state``); ``config.json`` holds every option, and a resume
that changes the recipe is refused (``canlib.training.run_folder``).

The step loop never waits for the device: losses, token counts and a non-finite-loss flag
are summed on it, and the host reads them (and the clock) only at log points, validations,
epoch ends and the end of the run. A non-finite loss is therefore detected at the next such
point, named by the update it happened in, and stops the run before anything is saved.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils import clip_grad_norm_

from canlib.data.batching import Split, TokenBatchSampler, collate, sorted_batches
from canlib.io import atomic_write_bytes, origin, tqdm
from canlib.model.checkpoint import atomic_save, save_model
from canlib.model.config import ModelConfig
from canlib.model.seq2seq import Seq2Seq
from canlib.training.config import ADAM_OPTIONS, TrainConfig
from canlib.training.distributed import all_sum, barrier, dist_env, init_process_group
from canlib.training.hash_dropout import set_dropout_key, use_hash_dropout
from canlib.training.kernels import kernel_choices, setup_device
from canlib.training.objective import LabelSmoothedObjective, label_smoothed_nll_loss, split_loss
from canlib.training.run_folder import RunFolder
from canlib.training.schedule import LongWarmupWarning, check_warmup, inverse_sqrt_lr, inverse_sqrt_scheduler
from canlib.training.state import (
    CKPT_RE,
    LAST_NAME,
    average_checkpoints,
    checkpoint_name,
    seed_everything,
)
from canlib.training.watch import StopSignals, TrainingInterrupted, run_bar, train_line, validation_line

__all__ = [
    "Trainer",
    "TrainConfig",
    "NonFiniteLossError",
    "LongWarmupWarning",
    "TrainingInterrupted",
    "label_smoothed_nll_loss",
    "split_loss",
    "average_checkpoints",
    "inverse_sqrt_lr",
]


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the run stops before saving anything."""


class Trainer(RunFolder):
    """Trains one model on one split and writes a run directory (see the module docstring).

    ``valid_bleu(model) -> float``, if given, is called at every validation on the raw
    (unwrapped, eval-mode) model; then BLEU (higher is better) drives early stopping and
    best.pt instead of the validation loss. ``console``: print a line per validation and what average.pt
    holds; ``stop_signals`` (e.g. SIGINT, SIGTERM): while :meth:`fit` runs, each stops the run after its
    current update with the state saved (:class:`TrainingInterrupted`). ``run_info``: more keys for config.json.
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
        console: bool = False,
        stop_signals: Iterable[int] = (),
        run_info: dict[str, Any] | None = None,
    ) -> None:
        self.model_cfg, self.cfg = model_cfg, cfg
        self.train_split, self.valid_split = train_split, valid_split
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.vocab, self.valid_bleu, self.data_path = vocab, valid_bleu, data_path
        self.vocab_id = getattr(vocab, "id", None)
        self.rank, self.local_rank, self.world_size = dist_env()
        self.is_main = self.rank == 0
        self.console, self.run_info = console, dict(run_info or {})
        self._signals = StopSignals(stop_signals)
        self._saved_step: int | None = None  # the step of the newest checkpoint this process wrote

        self._check_data()
        self.sampler = self._sampler()
        if not (resume and (self.checkpoints() or (self.ckpt_dir / LAST_NAME).is_file())):
            check_warmup(self.planned_updates(), cfg.lr, cfg.warmup)  # before the run folder is written or removed
        self.device = setup_device(cfg.device, self.local_rank, cfg.precision, cfg.deterministic)
        init_process_group(self.device, self.world_size)
        resume_from = self._prepare_run_dir(resume, overwrite)

        self._build(init_weights)
        self.step, self.epoch, self.wall = 0, 0, 0.0
        self.best: dict[str, Any] = {"metric": None, "step": None, "bad": 0}
        self.last_valid: dict[str, Any] = {}
        self._tic: float | None = None  # when the running stretch of updates began; None while paused
        self._bad_step = torch.zeros((), dtype=torch.int64, device=self.device)  # first update with a non-finite loss
        self._bad_value = torch.zeros((), dtype=torch.float64, device=self.device)
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

    def _sampler(self) -> TokenBatchSampler:
        """This rank's token batches of the training split (an epoch's order drawn from the seed)."""
        split, cfg = self.train_split, self.cfg
        sampler = TokenBatchSampler(
            split.src_lens,
            split.tgt_lens,
            cfg.max_tokens,
            seed=cfg.seed,
            rank=self.rank,
            world_size=self.world_size,
            pad_multiple=cfg.pad_multiple,
        )
        if len(sampler) == 0:
            raise ValueError(
                f"the training split{self._data_name()} makes fewer batches than world_size={self.world_size}"
            )
        return sampler

    def _build(self, init_weights: dict[str, Tensor] | None) -> None:
        """The model (seeded, or ``init_weights``), its loss, DDP around both, Adam, the schedule and the scaler."""
        cfg = self.cfg
        seed_everything(cfg.seed)
        self.model = Seq2Seq(self.model_cfg).to(self.device)
        if init_weights is not None:  # fine-tuning: start from given weights instead of a fresh init
            self.model.load_state_dict(init_weights)
        if cfg.dropout_rng == "counter-hash":
            use_hash_dropout(self.model)
        if self.rank:
            seed_everything(cfg.seed + self.rank)  # different dropout masks per rank
        # model + loss in one module, so DDP's hooks see the whole forward
        self.objective = LabelSmoothedObjective(
            self.model, cfg.label_smoothing, self.model_cfg.pad_id, cfg.loss_chunk, cfg.compile, cfg.loss_vocab_block
        )
        self.ddp: torch.nn.Module = self.objective
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp = DistributedDataParallel(self.objective, device_ids=ids)
        adam = dict(betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay, **ADAM_OPTIONS[cfg.optimizer])
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, **adam)
        self.scheduler = inverse_sqrt_scheduler(self.optimizer, cfg.warmup)
        # fp16 only: its step reads a flag on the host
        self.scaler = torch.amp.GradScaler("cuda", enabled=cfg.precision == "fp16")
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)

    def _data_name(self) -> str:
        return f" of {self.data_path}" if self.data_path else ""

    def epoch_of_last_update(self) -> int:
        """The epoch (counted from 1, as the bar, the log rows and the resume message count it) that the latest
        update belongs to: the one in progress, or the one just finished."""
        in_progress = self.sampler.epoch == self.epoch and self.sampler.position > 0
        return self.epoch + 1 if in_progress or self.epoch == 0 else self.epoch

    def eta(self) -> float | None:
        """Seconds of updates left until the planned stop, at the mean pace so far (None: unknown)."""
        planned = self.planned_updates()
        if not planned or not self.step:
            return None
        return max(planned - self.step, 0) * self.wall / self.step

    def planned_updates(self) -> int | None:
        """The updates the run will make if nothing stops it early: ``max_steps``, or ``max_epochs`` epochs of the
        first epoch's length, whichever comes first; None when only patience stops it."""
        limits = [self.cfg.max_steps] if self.cfg.max_steps else []
        if self.cfg.max_epochs:
            limits.append(self.cfg.max_epochs * math.ceil(len(self.sampler) / self.cfg.update_freq))
        return min(limits) if limits else None

    def _log(self, row: dict[str, Any]) -> None:
        if self.is_main:
            with open(self.run_dir / "log.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")

    # -- one update -------------------------------------------------------------------------------
    def _batch_to_device(self, indices: list[int], split: Split, name: str) -> dict[str, Any]:
        cfg = self.model_cfg
        batch = collate(split, indices, cfg.pad_id, cfg.bos_id, cfg.eos_id, self.cfg.pad_multiple)
        for key, side in (("src", "source"), ("tgt_out", "target")):  # on the host copy: no device round trip
            ids = batch[key].numpy()
            bad = (ids < 0) | (ids >= cfg.vocab_size)
            if bad.any():
                row = int(bad.any(axis=1).nonzero()[0][0])
                value = int(ids[row][bad[row]][0])
                raise ValueError(
                    f"example {indices[row]} of the {name} split{self._data_name()} has {side} token id {value}, "
                    f"outside [0, vocab_size={cfg.vocab_size}): the corpus was tokenized with another vocabulary"
                )
        pin = self.device.type == "cuda"
        for key in ("src", "tgt_in", "tgt_out"):
            t = batch[key]
            batch[key] = (t.pin_memory() if pin else t).to(self.device, non_blocking=True)
        return batch

    def _autocast(self) -> AbstractContextManager:
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    @contextmanager
    def _forward_context(self) -> Iterator[None]:
        """A forward pass as training runs it: the configured kernels and autocast precision."""
        with self._kernels(), self._autocast():
            yield

    def _kernels(self) -> ExitStack:
        """The kernel choices of TrainConfig: the attention backend, deterministic algorithms."""
        return kernel_choices(self.cfg.sdpa_backend, self.cfg.deterministic)

    def _no_sync(self, last: bool) -> AbstractContextManager:
        """With several ranks, DDP averages the gradients during the last micro-batch's backward only."""
        return nullcontext() if last or self.world_size == 1 else self.ddp.no_sync()

    def _token_scale(self, batches: list[dict[str, Any]]) -> tuple[Tensor | float, int | Tensor]:
        """(the factor that turns summed losses into the mean per target token of the whole update, its tokens).

        DDP averages gradients over ranks; scaling by world_size / global tokens makes the update the
        per-token mean over the whole effective batch (fairseq's normalisation)."""
        tokens: int | Tensor = sum(b["ntokens"] for b in batches)
        if self.world_size > 1:
            tokens = all_sum(torch.full((), float(tokens), dtype=torch.float64, device=self.device), self.world_size)
        return self.world_size / tokens, tokens

    def _flag_nonfinite(self, loss_sum: Tensor) -> None:
        """Remember the first update whose loss is not finite, on the device (read at the next log point)."""
        first = ~torch.isfinite(loss_sum) & self._bad_step.eq(0)
        self._bad_step = torch.where(first, self.step + 1, self._bad_step)
        self._bad_value = torch.where(first, loss_sum, self._bad_value)

    def _update(self, group: list[list[int]]) -> tuple[Tensor, Tensor, int | Tensor]:
        """One optimizer update over ``group`` micro-batches. Returns the loss and NLL sums
        (device tensors, summed over ranks) and the target tokens: nothing here waits for
        the device."""
        with self._kernels():
            self.ddp.train()
            batches = [self._batch_to_device(b, self.train_split, "train") for b in group]
            scale, tokens = self._token_scale(batches)
            sums = torch.zeros(2, dtype=torch.float64, device=self.device)
            for i, batch in enumerate(batches):
                if self.cfg.dropout_rng == "counter-hash":
                    set_dropout_key(self.model, self.cfg.seed + self.rank, self.step + 1, i)
                # the label-smoothed loss and the NLL, each summed over the target tokens
                with self._no_sync(last=i == len(batches) - 1), self._autocast():
                    loss, nll = self.ddp(batch["src"], batch["tgt_in"], batch["tgt_out"])
                # gradients of the mean loss per target token of the whole update
                self.scaler.scale(loss * scale).backward()
                sums += torch.stack([loss.detach(), nll.detach()]).double()
            sums = all_sum(sums, self.world_size)
            self._flag_nonfinite(sums[0])
            if self.cfg.clip_norm > 0:
                self.scaler.unscale_(self.optimizer)
                clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
            self.scaler.step(self.optimizer)  # Adam
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()  # the learning rate of the next update
            self.step += 1
        return sums[0], sums[1], tokens

    def _raise_if_nonfinite(self) -> None:
        """Read the device's non-finite flag (a host sync: only at log, validation and epoch points)."""
        bad_step = int(self._bad_step)
        if bad_step:
            last = (self.checkpoints() or ["none (no checkpoint written yet)"])[-1]
            raise NonFiniteLossError(
                f"training loss is {float(self._bad_value)} at step {bad_step} (epoch {self.epoch + 1}); "
                f"stopped without saving; the last good checkpoint is {last}"
            )

    # -- the clock: update time only, read when the host waits anyway ------------------------------------
    def _start_clock(self) -> None:
        if self._tic is None:
            self._tic = time.perf_counter()

    def _stop_clock(self, interval: dict[str, Any]) -> None:
        """Wait for the device, add the stretch of updates since ``_start_clock`` to ``wall`` and the interval."""
        if self._tic is None:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - self._tic
        self._tic = None
        self.wall += elapsed
        interval["time"] += elapsed

    # -- validation ---------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, Any]:
        """Label-smoothed loss and NLL per target token on the validation split (+ BLEU if a hook is given)."""
        out: dict[str, Any] = {}
        if self.valid_split is not None and len(self.valid_split):
            self.model.eval()
            batches = sorted_batches(self.valid_split, self.cfg.max_tokens, self.cfg.pad_multiple)
            mine = (
                self._batch_to_device(indices.tolist(), self.valid_split, "valid")
                for indices in batches[self.rank :: self.world_size]
            )
            out = split_loss(self.objective, mine, self.device, self.world_size, self._forward_context)
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
        higher = "valid_bleu" in self.last_valid
        metric = self.last_valid.get("valid_bleu" if higher else "valid_loss")
        is_best = False
        if metric is not None:
            best = self.best["metric"]
            is_best = best is None or (metric > best if higher else metric < best)
            if is_best:
                self.best = {"metric": metric, "step": self.step, "bad": 0}
            else:
                self.best["bad"] += 1
        self._log(
            {
                "kind": "valid",
                "step": self.step,
                "epoch": self.epoch_of_last_update(),
                **self.last_valid,
                "best": self.best["metric"],
                "wall": round(self.wall, 3),
            }
        )
        if self.console and self.is_main:
            tqdm.write(validation_line(self.step, self.last_valid, is_best), file=sys.stdout)
        self.save_checkpoint(is_best)
        self._saved_step = self.step
        return self._patience_spent()

    def _patience_spent(self) -> bool:
        return bool(self.cfg.patience and self.best["bad"] >= self.cfg.patience)

    # -- the loop -----------------------------------------------------------------------------------------
    def stop_reason(self) -> str | None:
        """Why the run would stop before its next update (a finished run, resumed), or None."""
        return self._stop_reason(self._patience_spent())

    def _stop_reason(self, early_stop: bool) -> str | None:
        """The one place that decides whether (and why) training stops."""
        if early_stop:
            return "early_stopping"
        if self.cfg.max_steps and self.step >= self.cfg.max_steps:
            return "max_steps"
        if self.cfg.max_epochs and self.epoch >= self.cfg.max_epochs:
            return "max_epochs"
        return None

    def _groups(self) -> Iterator[list[list[int]]]:
        """The rest of the current epoch, ``update_freq`` micro-batches per update (the last may hold fewer)."""
        if self.sampler.epoch != self.epoch:
            self.sampler.set_epoch(self.epoch)
        group: list[list[int]] = []
        for indices in self.sampler:
            group.append(indices)
            if len(group) == self.cfg.update_freq:
                yield group
                group = []
        if group:
            yield group

    def _epoch_drawn(self) -> bool:
        """Every batch of the current epoch has been handed out."""
        return self.sampler.epoch == self.epoch and self.sampler.position >= len(self.sampler)

    def fit(self) -> dict[str, Any]:
        """Train until max_steps / max_epochs / early stopping; write average.pt and result.json."""
        cfg = self.cfg
        if not (cfg.max_steps or cfg.max_epochs or cfg.patience):
            raise ValueError("set max_steps, max_epochs or patience: otherwise training never stops")
        if cfg.patience and self.valid_split is None and self.valid_bleu is None:
            raise ValueError(f"patience={cfg.patience} needs a validation split or a valid_bleu hook to watch")
        interval: dict[str, Any] = {"loss": 0.0, "nll": 0.0, "tokens": 0, "steps": 0, "time": 0.0}
        stop = self.stop_reason()
        bar = run_bar(self.planned_updates(), self.step, self.epoch, cfg.progress and self.is_main)
        with bar, self._signals:
            while stop is None:
                if self._epoch_drawn():  # resumed from a checkpoint written after an epoch's last update
                    stop = self._stop_reason(self._end_epoch(interval))
                    continue
                bar.set_description(f"epoch {self.epoch + 1}")
                for group in self._groups():
                    self._start_clock()
                    loss, nll, tokens = self._update(group)
                    for key, value in (("loss", loss), ("nll", nll), ("tokens", tokens), ("steps", 1)):
                        interval[key] += value
                    bar.update(1)
                    early = False
                    log_point = self.step % cfg.log_every == 0 or self.step == cfg.max_steps
                    if log_point:
                        self._log_interval(interval, bar)
                    if cfg.valid_every and self.step % cfg.valid_every == 0:
                        early = self._checkpoint_point(interval)
                    epoch_over = self._epoch_drawn()
                    if epoch_over and not early:
                        early = self._end_epoch(interval)
                    stop = self._stop_reason(early)
                    if stop is None:
                        self._between_checkpoints(interval, log_point)
                    if stop is not None or epoch_over:
                        break
        self._last_checkpoint(interval)
        return self._finish(stop)

    def _last_checkpoint(self, interval: dict[str, Any]) -> None:
        """At the end of the run: log the updates since the last row and checkpoint the final step, unless saved."""
        if interval["steps"]:
            self._log_interval(interval, None)
        self._stop_clock(interval)
        last = self.checkpoints()
        if not last or last[-1].name != checkpoint_name(self.step):
            self._checkpoint_point(interval)

    def _between_checkpoints(self, interval: dict[str, Any], log_point: bool) -> None:
        """After an update that ends no run: stop on a signal (the state saved first), or save the newest state
        every ``save_every`` updates."""
        if self._stop_requested(log_point):
            if interval["steps"]:
                self._log_interval(interval, None)
            path = self._save_latest(interval)
            raise TrainingInterrupted(self._signals.received or 0, self.step, path)
        if self.cfg.save_every and self.step % self.cfg.save_every == 0:
            self._save_latest(interval)

    def _stop_requested(self, log_point: bool) -> bool:
        """Whether a stop signal arrived; with several ranks they agree at log points only (one all-reduce)."""
        if self.world_size == 1:
            return self._signals.received is not None
        if not log_point:
            return False
        flag = torch.tensor(float(self._signals.received is not None), device=self.device)
        return bool(all_sum(flag, self.world_size) > 0)

    def _save_latest(self, interval: dict[str, Any]) -> Path:
        """Save the state after this update to ``last.pt`` (unless a step checkpoint of it exists), outside the
        clock and only once the losses are known to be finite; returns the file that holds it."""
        if self._saved_step == self.step:
            return self.ckpt_dir / checkpoint_name(self.step)
        self._stop_clock(interval)
        self._raise_if_nonfinite()
        state = self._state()  # collective when distributed
        path = self.ckpt_dir / LAST_NAME
        if self.is_main:
            atomic_save(state, path)
        barrier(self.world_size)
        self._saved_step = self.step
        return path

    def _end_epoch(self, interval: dict[str, Any]) -> bool:
        """Count the epoch done and start the next; with valid_every = 0 validate and checkpoint here.
        True when early stopping says stop."""
        self._stop_clock(interval)
        self._raise_if_nonfinite()
        self.epoch += 1
        self.sampler.set_epoch(self.epoch)
        if interval["steps"]:
            self._log_interval(interval, None)
        return bool(not self.cfg.valid_every and self._checkpoint_point(interval))

    def _checkpoint_point(self, interval: dict[str, Any]) -> bool:
        """Validate and checkpoint outside the clock, after checking the losses are finite; True = early stop."""
        self._stop_clock(interval)
        self._raise_if_nonfinite()
        return self._validate_and_checkpoint()

    def _log_interval(self, interval: dict[str, Any], bar: tqdm | None) -> None:
        """One train row: means over the updates since the last row; target tokens and their rate;
        ``wall`` = seconds spent in updates so far (validation and checkpoints excluded, kept across resumes)."""
        self._stop_clock(interval)
        self._raise_if_nonfinite()
        tokens = int(interval["tokens"])
        row = {
            "kind": "train",
            "step": self.step,
            "epoch": self.epoch_of_last_update(),
            "train_loss": float(interval["loss"]) / tokens,
            "train_nll": float(interval["nll"]) / tokens,
            "lr": self.optimizer.param_groups[0]["lr"],
            "tokens": tokens,
            "tokens_per_sec": tokens / max(interval["time"], 1e-9),
            "wall": round(self.wall, 3),
        }
        self._log(row)
        if self.console and self.is_main and (not sys.stdout.isatty() or not self.cfg.progress):
            tqdm.write(train_line(row, self.eta()), file=sys.stdout)  # a log file gets the rows the bar shows
        if bar is not None:
            bar.set_postfix(
                loss=f"{row['train_loss']:.3f}", lr=f"{row['lr']:.2e}", tok_s=f"{row['tokens_per_sec']:.0f}"
            )
        interval.update(loss=0.0, nll=0.0, tokens=0, steps=0, time=0.0)

    def _finish(self, stop_reason: str) -> dict[str, Any]:
        """Average the last checkpoints into average.pt and write result.json."""
        result: dict[str, Any] = {}
        if self.is_main:
            chosen = self._to_average()
            averaged = average_checkpoints(chosen)
            model = Seq2Seq(self.model_cfg)
            model.load_state_dict(averaged)
            save_model(model, self.run_dir / "average.pt", vocab_id=self.vocab_id, averaged=[p.name for p in chosen])
            result = {
                "stop_reason": stop_reason,
                "step": self.step,
                "epoch": self.epoch,
                "wall_s": round(self.wall, 3),
                "best": self.best,
                "last_valid": self.last_valid,
                "averaged": [p.name for p in chosen],
                "params": self.model.num_parameters(),
                "provenance": origin(self.device),
                "config": {
                    "model": self.model_cfg.to_dict(),
                    "train": self.cfg.to_dict(),
                    "data": self.data_path,
                    "vocab_id": self.vocab_id,
                },
            }
            atomic_write_bytes((json.dumps(result, indent=1) + "\n").encode(), self.run_dir / "result.json")
            (self.ckpt_dir / LAST_NAME).unlink(missing_ok=True)  # the final step checkpoint holds a later state
        barrier(self.world_size)
        return result

    def _to_average(self) -> list[Path]:
        """The newest ``average_last`` step checkpoints that were written after the warm-up (a model still warming
        up would drag the mean back), or the newest alone when every one is inside the warm-up; said on the
        console."""
        # the newest keep_last files are consecutive; an older best.pt twin kept by _prune is not averaged
        recent = self.checkpoints()[-self.cfg.keep_last :][-max(self.cfg.average_last, 1) :]
        chosen = [p for p in recent if int(CKPT_RE.match(p.name).group(1)) >= self.cfg.warmup] or recent[-1:]
        if self.console:
            steps = ", ".join(str(int(CKPT_RE.match(p.name).group(1))) for p in chosen)
            left = len(recent) - len(chosen)
            why = f" ({left} inside the {self.cfg.warmup}-update warm-up left out)" if left else ""
            tqdm.write(f"average.pt: the mean of the checkpoints of steps {steps}{why}", file=sys.stdout)
        return chosen
