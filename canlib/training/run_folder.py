"""A training run's folder: refusing to overwrite another run, the files written beside the checkpoints, and the
checkpoints themselves (every piece of state a bit-for-bit resume needs), a part of
:class:`~canlib.training.trainer.Trainer`."""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from canlib.io import atomic_write_bytes
from canlib.model.checkpoint import CheckpointError, atomic_save, model_payload, safe_load
from canlib.training.config import ADAM_OPTIONS, TrainConfig, changed_fields, resume_kind
from canlib.training.distributed import barrier
from canlib.training.state import (
    LAST_NAME,
    checkpoint_name,
    link_best,
    list_checkpoints,
    prune_checkpoints,
    resume_point,
    rng_state,
    seed_everything,
    set_rng_state,
    truncate_log,
)

# fields that change the last bits of an update but not the recipe: a resume that changes one warns (the optimizer's
# implementation is checked against the flags its saved state holds, in _load)
NUMERICS_FIELDS = tuple(n for n in TrainConfig.__dataclass_fields__ if resume_kind(n) == "kernel" and n != "optimizer")


def check_run_dir(run_dir: str | os.PathLike) -> None:
    """A run directory is a folder, or does not exist yet: a file at its place (or at one of its parents), or a
    folder of another kind (a prepared corpus, an export), is an error naming it, raised before anything is
    written, so what is there is left as it was."""
    path = Path(run_dir)
    for at in (path, *path.parents):
        if at.exists():
            if not at.is_dir():
                what = "" if at == path else f", so {path} cannot be a run directory"
                raise ValueError(f"{at}: is a file, not a folder{what}; give the run a folder of its own")
            break
    for marker, kind in (("meta.json", "a prepared corpus"), ("canlib.json", "an exported model")):
        if (path / marker).is_file() and not (path / "config.json").is_file():
            raise ValueError(f"{path}: holds {kind} ({marker}), not a run; give the run a folder of its own")


class RunFolder:
    """The run-folder and checkpoint methods of :class:`~canlib.training.trainer.Trainer` (which holds the state they
    read: ``run_dir``, ``cfg``, the model, optimizer, sampler and step counters)."""

    def _prepare_run_dir(self, resume: bool, overwrite: bool) -> Path | None:
        """Refuse to clobber another run or a file; on resume, check that the run continues with its own settings
        and return the checkpoint to continue from (None: nothing saved yet, the run starts from its first update)."""
        check_run_dir(self.run_dir)
        if resume and overwrite:
            raise ValueError("choose either resume or overwrite, not both")
        existing = self.checkpoints()
        saved = bool(existing) or (self.ckpt_dir / LAST_NAME).is_file()
        if saved and not (resume or overwrite):
            newest = existing[-1].name if existing else LAST_NAME
            raise ValueError(
                f"{self.run_dir} already holds another run's checkpoints ({newest}, "
                f"{len(existing)} step checkpoint(s)); "
                f"pass --resume to continue it or --overwrite to start over"
            )
        if overwrite and self.is_main:
            shutil.rmtree(self.ckpt_dir, ignore_errors=True)
            for name in ("log.jsonl", "average.pt", "result.json", "config.json", "vocab.model"):
                (self.run_dir / name).unlink(missing_ok=True)
        barrier(self.world_size)
        if not resume or not saved:
            return None
        config_file = self.run_dir / "config.json"
        if config_file.is_file():
            stored = json.loads(config_file.read_text())
            now = self.model_cfg.to_dict()
            if stored.get("model") != now:
                diff = {k: (v, now.get(k)) for k, v in stored.get("model", {}).items() if now.get(k) != v}
                raise ValueError(
                    f"{config_file}: the run was trained with another model config (field: (run, now)) {diff}"
                )
            if self.vocab_id is not None and stored.get("vocab_id") not in (None, self.vocab_id):
                raise ValueError(
                    f"{config_file}: the run used vocabulary {stored.get('vocab_id')}, the corpus "
                    f"given has {self.vocab_id}"
                )
            self._check_train_config(stored, config_file)
        found = resume_point(self.ckpt_dir)
        if found is None:
            raise CheckpointError(f"{self.ckpt_dir}: no readable checkpoint to resume from")
        return found

    def _check_train_config(self, stored: dict[str, Any], config_file: Path) -> None:
        """A resume continues the run's recipe: a changed recipe field is refused, a changed stopping point is
        said and written to ``config.json`` (so that the next resume continues to it)."""
        changed = changed_fields(stored.get("train", {}), self.cfg)
        recipe = {k: v for k, v in changed.items() if resume_kind(k) == "recipe"}
        if recipe:
            name, (old, new) = next(iter(recipe.items()))
            others = [k for k in recipe if k != name]
            more = f" (and {', '.join(others)})" if others else ""
            raise ValueError(
                f"{config_file}: the run has {name}={old!r}, this resume asks for {name}={new!r}{more}: "
                f"a resumed run keeps its recipe (to change it, start over with overwrite)"
            )
        moved = {k: v for k, v in changed.items() if resume_kind(k) in ("stop", "free")}
        if moved and self.is_main:
            for name, (old, new) in moved.items():
                if resume_kind(name) == "stop":
                    print(f"{self.run_dir}: {name} changed from {old} to {new}", file=sys.stderr)
            stored["train"] = {**stored["train"], **{k: new for k, (_, new) in moved.items()}}
            atomic_write_bytes((json.dumps(stored, indent=1) + "\n").encode(), config_file)

    def _write_run_files(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "model": self.model_cfg.to_dict(),
            "train": self.cfg.to_dict(),
            "data": self.data_path,
            "vocab_id": self.vocab_id,
            "world_size": self.world_size,
            **self.run_info,
        }
        atomic_write_bytes((json.dumps(config, indent=1) + "\n").encode(), self.run_dir / "config.json")
        if self.vocab is not None:
            self.vocab.save(self.run_dir / "vocab.model")
        (self.run_dir / "log.jsonl").write_text("")  # a fresh run starts a fresh log

    def checkpoints(self) -> list[Path]:
        """Step checkpoints of this run, oldest first."""
        return list_checkpoints(self.ckpt_dir)

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
            "threads": torch.get_num_threads(),  # CPU float sums, and so the last bits, depend on it
            "best": dict(self.best),
            "valid": dict(self.last_valid),
        }

    def save_checkpoint(self, is_best: bool) -> Path:
        """Write step_XXXXXXX.pt atomically, link best.pt to it if best, prune old ones."""
        state = self._state()  # collective when distributed: every rank builds it
        path = self.ckpt_dir / checkpoint_name(self.step)
        if self.is_main:
            atomic_save(state, path)
            if is_best:
                link_best(path)
            self._prune()
        barrier(self.world_size)
        return path

    def _prune(self) -> None:
        """Keep the newest ``keep_last`` step checkpoints, and always the best one."""
        prune_checkpoints(self.ckpt_dir, self.cfg.keep_last, self.best["step"])

    def _load(self, path: Path) -> None:
        state = safe_load(path)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])  # restores the saved implementation flags too
        saved_cfg, now = state.get("train_config", {}), self.cfg.to_dict()
        changed = {k: (saved_cfg[k], now[k]) for k in NUMERICS_FIELDS if k in saved_cfg and saved_cfg[k] != now[k]}
        if changed:
            warnings.warn(
                f"{path}: resumed with other kernel settings (field: (run, now)) {changed}; "
                f"the parameters will differ in the last bits from an uninterrupted run's"
            )
        wanted = ADAM_OPTIONS[self.cfg.optimizer]
        saved = {k: self.optimizer.param_groups[0].get(k) for k in wanted}
        if saved != wanted:
            warnings.warn(
                f"{path}: the run's optimizer ran as {saved}, this process asks for optimizer={self.cfg.optimizer!r}; "
                "continuing with the latter, so the parameters will differ in the last bits from an "
                "uninterrupted run's"
            )
            for group in self.optimizer.param_groups:
                group.update(wanted)
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step, self.epoch, self.wall = int(state["step"]), int(state["epoch"]), float(state["wall"])
        self.best, self.last_valid = dict(state["best"]), dict(state["valid"])
        rngs = state["rng"]
        if len(rngs) == self.world_size:
            set_rng_state(rngs[self.rank])
        else:
            warnings.warn(
                f"{path}: saved by {len(rngs)} rank(s), resumed on {self.world_size}; RNG streams are reseeded"
            )
            seed_everything(self.cfg.seed + self.rank + self.step)
        threads = state.get("threads")
        if self.device.type == "cpu" and threads is not None and threads != torch.get_num_threads():
            warnings.warn(
                f"{path}: the run used {threads} CPU thread(s), this process {torch.get_num_threads()}; "
                f"the resumed parameters will differ in the last bits from an uninterrupted run's"
            )
        if self.is_main:
            truncate_log(self.run_dir / "log.jsonl", self.step)
            print(f"resumed from {path} (step {self.step}, epoch {self.epoch_of_last_update()})", file=sys.stderr)
