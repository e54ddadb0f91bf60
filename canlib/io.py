"""Files and where they come from: atomic writes, provenance, and the data, cache and results folders.

The bottom of the library: every other part may import it, it imports no other part, so writing a
file or recording where a number came from never pulls in the model.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT_DIR = PACKAGE_DIR.parent  # the repository root when canlib runs from a checkout


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(file)`` on a temp file beside ``path``, fsync, then rename into place.

    A crash at any moment leaves either the old file or the new one, never a partial one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(data: bytes, path: str | os.PathLike) -> None:
    atomic_write(path, lambda f: f.write(data))


# -- folders ---------------------------------------------------------------------------------------

def data_dir() -> Path | None:
    """``$CANLIB_DATA_DIR``: local copies of the corpora (the offline path); None when unset."""
    value = os.environ.get("CANLIB_DATA_DIR")
    return Path(value) if value else None


def cache_dir() -> Path:
    """Downloads, prepared corpora, training runs and cached studies: ``$CANLIB_CACHE_DIR``, else ~/.cache/canlib."""
    return Path(os.environ.get("CANLIB_CACHE_DIR") or Path.home() / ".cache" / "canlib")


def results_dir() -> Path:
    """Stored results the book shows: ``$CANLIB_RESULTS_DIR``, else ``book/results`` of the checkout
    canlib runs from, else ``book/results`` under the current folder (an installed canlib)."""
    value = os.environ.get("CANLIB_RESULTS_DIR")
    if value:
        return Path(value)
    if (CHECKOUT_DIR / "_toc.yml").exists():
        return CHECKOUT_DIR / "book" / "results"
    return Path.cwd() / "book" / "results"


# -- provenance ------------------------------------------------------------------------------------

def git_commit(repo: Path = CHECKOUT_DIR) -> str:
    """HEAD's hash, with "+dirty" when the work tree has uncommitted changes; "unknown" outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def device_name(device: Any = "cpu") -> str:
    """A human-readable name of the device that produced a number."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU: {cpu}, {torch.get_num_threads()} threads"


def origin(device: Any = "cpu") -> dict[str, Any]:
    """Where a number was made: commit, UTC date, device, torch and Python versions."""
    import torch

    return {
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
