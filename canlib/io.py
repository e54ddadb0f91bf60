"""Files and where they come from: atomic writes, provenance, and the data, cache and results folders.

The bottom of the library: every other part may import it, it imports no other part, so writing a
file or recording where a number came from never pulls in the model. It also holds the checks every
command applies to its option values (``checked``, ``option_type``), and imports the optional
third-party packages for the rest (``require``, ``tqdm``): see the end of this file.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT_DIR = PACKAGE_DIR.parent  # the repository root when canlib runs from a checkout


def umask() -> int:
    """The process's file-creation mask (read by setting it and putting it back: POSIX has no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two existing paths name one file (through links, ``..`` or another spelling)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(file)`` on a temp file beside ``path``, fsync, then rename into place.

    A crash at any moment leaves either the old file or the new one, never a partial one. The file gets
    the permissions ``open()`` gives a new file (0666 less the umask; a temp file alone would be 0600).
    A symlink is followed (its target is replaced, the link kept); what is not a regular file (a named pipe,
    ``/dev/null``, a terminal) is opened and written to, since renaming over it would destroy it.
    """
    path = Path(path)
    path = Path(os.path.realpath(path)) if path.is_symlink() else path  # the link stays a link
    if path.exists() and not path.is_file():  # a pipe, a device, a socket: written to, never replaced
        with open(path, "wb") as f:
            write(f)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
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


# -- option values ---------------------------------------------------------------------------------
# One rule per kind of value, shared by the dataclasses that hold options (TrainConfig) and by the command
# line, which checks each value as it parses it: NaN, infinities and out-of-range numbers never reach the work.

RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "positive": (lambda x: x > 0, "must be positive"),
    "nonnegative": (lambda x: x >= 0, "must be >= 0"),
    "at least 1": (lambda x: x >= 1, "must be >= 1"),
    "fraction": (lambda x: 0 <= x < 1, "must be in [0, 1)"),
    "finite": (lambda x: True, ""),
}


def checked(value: Any, rule: str | None) -> str | None:
    """What is wrong with ``value`` under ``rule`` (a key of ``RULES``), or None when it is fine."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if rule is None:
        return None
    ok, problem = RULES[rule]
    return None if ok(value) else problem


def option_type(kind: type, rule: str | None = None) -> Callable[[str], Any]:
    """An argparse ``type``: the text converted to ``kind`` and checked against ``rule``, else an error
    naming the value (argparse adds the option)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        problem = checked(value, rule)
        if problem:
            raise argparse.ArgumentTypeError(f"{text}: {problem}")
        return value

    parse.__name__ = kind.__name__
    return parse


def device_option(text: str) -> str:
    """An argparse ``type`` for a device option: one this PyTorch has (``cpu``, or ``cuda``/``cuda:N`` with a GPU)."""
    import torch

    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a device (cpu, cuda, cuda:N)") from None
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text}: choose cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: this PyTorch ({torch.__version__}) sees no CUDA GPU; use cpu")
    return text


# -- CPU threads -----------------------------------------------------------------------------------
# PyTorch's default (one thread per core) is what an idle machine wants; on a machine that other work keeps busy,
# threads that wait on each other can make a command several times slower than one thread would.

MOST_DEFAULT_THREADS = 4  # past this, the small models here gain little from more threads on a CPU


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask; every core where the OS has none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def default_threads() -> int:
    """The threads a command computes with unless ``--threads`` says: ``$OMP_NUM_THREADS`` where set, else the
    cores, at most ``MOST_DEFAULT_THREADS``."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) >= 1:
        return int(value)
    return min(cores(), MOST_DEFAULT_THREADS)


def busy_notice(load: float, threads: int, available: int) -> str | None:
    """A one-line notice when the 1-minute load average exceeds the cores (other work competes for them)."""
    if load <= available:
        return None
    advice = "; --threads 1 is often faster on a shared machine" if threads > 1 else ""
    return (
        f"note: the machine is busy (load average {load:.1f} on {available} core(s)), {threads} thread(s) here{advice}"
    )


def use_threads(threads: int | None) -> tuple[int, str | None]:
    """Set PyTorch's CPU threads to ``threads`` (None: :func:`default_threads`); returns the number set and, when
    the machine is busy, the notice for the command to print (:func:`busy_notice`)."""
    import torch

    threads = threads or default_threads()
    torch.set_num_threads(threads)
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system
        return threads, None
    return threads, busy_notice(load, threads, cores())


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=option_type(int, "at least 1"),
        default=None,
        help=f"CPU threads to compute with (default: $OMP_NUM_THREADS, else the cores, at most "
        f"{MOST_DEFAULT_THREADS}; on a busy machine 1 is often fastest)",
    )


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

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
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


# -- optional packages ------------------------------------------------------------------------------------
# A GPU machine may hold nothing but PyTorch and NumPy, and the speed benchmarks, the training smoke test and
# the profiler must still import there. So BLEU (sacrebleu, sacremoses), the subword vocabulary
# (sentencepiece) and CTranslate2 are imported inside the functions that use them, through ``require``, which
# names the package and its pip command when it is missing; and progress bars use ``tqdm``: tqdm's bar where
# tqdm is installed, otherwise a stand-in that counts and draws nothing.


class MissingDependency(ImportError):
    """An optional package that this use needs is not installed (the message says which and how to get it)."""


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (e.g. ``"sacremoses"`` or ``"sacrebleu.metrics"``) or fail naming the package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]  # each optional package installs under its import name
        raise MissingDependency(
            f"{purpose} needs the {package!r} package, which is not installed here ({exc}): pip install {package}"
        ) from exc


class _NoBar:
    """Stands in for ``tqdm.tqdm`` where tqdm is not installed: iterates and counts, draws nothing.

    The first bar that was asked to show (``disable=False``) says once, on stderr, why none appears."""

    told = False

    def __init__(
        self,
        iterable: Iterable[Any] | None = None,
        *args: Any,
        disable: bool = False,
        total: float | None = None,
        initial: float = 0,
        **kwargs: Any,
    ) -> None:
        self.iterable, self.disable, self.total, self.n = iterable, disable, total, initial
        if not disable and not _NoBar.told:
            _NoBar.told = True
            print("canlib: no progress bar: tqdm is not installed (pip install tqdm)", file=sys.stderr)

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable if self.iterable is not None else ():
            yield item
            self.n += 1

    def __len__(self) -> int:
        return len(self.iterable) if self.iterable is not None else int(self.total or 0)  # type: ignore[arg-type]

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        self.n += n

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_description(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    @staticmethod
    def write(text: str, file: Any = None, **kwargs: Any) -> None:
        print(text, file=file or sys.stdout)


try:
    from tqdm import tqdm
except ImportError:
    tqdm = _NoBar  # type: ignore[misc,assignment]
