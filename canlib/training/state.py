"""What a resumable run keeps on disk besides the weights: RNG streams, the checkpoint files
(listed, pruned, linked as best, averaged) and the log, truncated back to the checkpoint resumed.

A checkpoint holds everything the next update depends on (weights, Adam moments, schedule,
grad scaler, step, epoch, sampler position, every RNG), so a run killed at any moment and
resumed from its last checkpoint retraces the same updates: on CPU the final parameters are
bit-identical to an uninterrupted run's, given the same number of threads (float sums are
split across threads, so another count changes the last bits; the checkpoint records it).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from canlib.io import atomic_write_bytes
from canlib.model.checkpoint import CheckpointError, safe_load

CKPT_RE = re.compile(r"^step_(\d{7,})\.pt$")
LAST_NAME = "last.pt"  # the newest state saved between validations (--save-every, an interrupt); never averaged


# -- RNG state as tensors (loadable with weights_only=True) --------------------------------
def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch (and CUDA, once initialised) generator states, as tensors and numbers."""
    version, internal, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` saved."""
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


# -- checkpoint files ------------------------------------------------------------------------
def list_checkpoints(ckpt_dir: Path) -> list[Path]:
    """Step checkpoints (step_XXXXXXX.pt) in ``ckpt_dir``, oldest first; temp files and best.pt excluded."""
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := CKPT_RE.match(p.name))]
    return [p for _, p in sorted(found)]


def checkpoint_name(step: int) -> str:
    return f"step_{step:07d}.pt"


def newest_readable(paths: Sequence[Path]) -> Path | None:
    """The newest checkpoint that loads (a kill can leave the last one unreadable), with a warning per skip."""
    for path in reversed(paths):
        try:
            safe_load(path)
            return path
        except CheckpointError as exc:
            warnings.warn(f"skipping unreadable checkpoint: {exc}")
    return None


def resume_point(ckpt_dir: Path) -> Path | None:
    """The checkpoint a resume continues from: of the newest readable step checkpoint and ``last.pt`` (the state
    saved between validations), the one that holds the later step."""
    found = newest_readable(list_checkpoints(ckpt_dir))
    last = ckpt_dir / LAST_NAME
    if last.is_file():
        try:
            step = int(safe_load(last)["step"])
        except (CheckpointError, KeyError, TypeError, ValueError) as exc:
            warnings.warn(f"skipping unreadable checkpoint: {last}: {exc}")
        else:
            if found is None or step > int(CKPT_RE.match(found.name).group(1)):
                return last
    return found


def link_best(path: Path) -> None:
    """best.pt beside ``path`` = the same file (a hard link: no second copy on disk), replaced atomically."""
    tmp = path.parent / ".best.pt.tmp"
    tmp.unlink(missing_ok=True)
    try:
        os.link(path, tmp)
    except OSError:
        shutil.copyfile(path, tmp)
    os.replace(tmp, path.parent / "best.pt")


def prune_checkpoints(ckpt_dir: Path, keep_last: int, best_step: int | None) -> None:
    """Keep the newest ``keep_last`` step checkpoints, and always the best one."""
    for path in list_checkpoints(ckpt_dir)[:-keep_last]:
        if best_step is None or path.name != checkpoint_name(best_step):
            path.unlink(missing_ok=True)


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
                raise CheckpointError(
                    f"{path}: {name} has shape {tuple(value.shape)}, {paths[0]} has {tuple(ref.shape)}"
                )
            if value.is_floating_point():
                total[name] = total[name] + value.double() if name in total else value.double()
    return {name: (total[name] / len(paths)).to(ref.dtype) if name in total else ref for name, ref in first.items()}


# -- the log -----------------------------------------------------------------------------------
def truncate_log(log: Path, step: int) -> None:
    """Drop log lines written after ``step`` (the replayed updates log again) and a last line a kill cut short."""
    if not log.is_file():
        return
    kept = []
    for line in log.read_text().splitlines():
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line)
        except (json.JSONDecodeError, KeyError, TypeError):
            pass  # a line cut short by the kill
    atomic_write_bytes("".join(r + "\n" for r in kept).encode(), log)
