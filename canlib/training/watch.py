"""What a person running ``canlib train`` sees and does: one bar for the whole run with an ETA to its stop, one
console line per validation, and SIGINT (Ctrl-C) or SIGTERM stopping the run after the current update with its
state saved, a part of :class:`~canlib.training.trainer.Trainer`.

The log (``log.jsonl``) stays the machine-readable record; the console lines are for reading as the run goes.
"""

from __future__ import annotations

import datetime
import math
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any

from canlib.io import tqdm


class TrainingInterrupted(KeyboardInterrupt):
    """A stop signal arrived: the update it interrupted was finished and the state saved to ``checkpoint``."""

    def __init__(self, signum: int, step: int, checkpoint: Path) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        super().__init__(f"{signal.Signals(signum).name} after update {step}: saved {checkpoint}")

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number (130 for SIGINT, 143 for
        SIGTERM)."""
        return 128 + self.signum


class StopSignals:
    """While active (a ``with`` block in the main thread), the given signals ask the run to stop after its current
    update instead of raising at once; ``received`` says which came first. A second SIGINT stops at once (Python's
    own KeyboardInterrupt), for a run that is stuck."""

    def __init__(self, signums: Iterable[int] = ()) -> None:
        self.signums = tuple(signums)
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.signums:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signum
        tqdm.write(
            f"{signal.Signals(signum).name}: stopping after this update and saving the run "
            "(Ctrl-C again stops at once, without saving)",
            file=sys.stderr,
        )


def run_bar(total: int | None, done: int, epoch: int, show: bool) -> tqdm:
    """One bar for the whole run: ``done`` of ``total`` updates (None: the run stops on patience alone), so tqdm's
    ETA is the time to the run's stop. Drawn on stderr when it is a terminal (a log file gets the validation
    lines and log.jsonl, not the bar's redraws)."""
    return tqdm(
        total=total,
        initial=done,
        desc=f"epoch {epoch + 1}",
        unit="upd",
        disable=None if show else True,
        dynamic_ncols=True,
        file=sys.stderr,
    )


def validation_line(step: int, valid: dict[str, Any], best: bool) -> str:
    """One validation as a console line: the label-smoothed loss, the NLL and its perplexity (e^NLL per target
    token), BLEU where a hook computes it."""
    parts = [f"valid | step {step}"]
    if "valid_loss" in valid:
        nll = valid["valid_nll"]
        ppl = math.exp(nll) if nll < 700 else math.inf
        parts.append(f"loss {valid['valid_loss']:.3f} | nll {nll:.3f} | ppl {ppl:.2f}")
    if "valid_bleu" in valid:
        parts.append(f"bleu {valid['valid_bleu']:.2f}")
    if best:
        parts.append("best so far")
    return " | ".join(parts)


def train_line(row: dict[str, Any], eta: float | None) -> str:
    """One training row as a console line (what the bar shows, for a log file): loss, learning rate, speed, ETA."""
    parts = [
        f"train | step {row['step']} | epoch {row['epoch']}",
        f"loss {row['train_loss']:.3f} | nll {row['train_nll']:.3f} | lr {row['lr']:.3g}",
        f"{row['tokens_per_sec']:,.0f} tok/s",
    ]
    if eta is not None:
        parts.append(f"eta {datetime.timedelta(seconds=round(eta))}")
    return " | ".join(parts)
