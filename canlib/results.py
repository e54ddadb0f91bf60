"""Stored results with their provenance.

Every number the book shows is either computed while the chapter runs or loaded
from a JSON file that a canlib command wrote together with where it came from:
git commit, date, device, scale and the configuration. ``load_result`` refuses a
file without that record, so a number can never lose its origin.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

from .checkpoint import atomic_write_bytes

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "book" / "results"
PROVENANCE_KEYS = ("commit", "date", "device", "scale", "config")
SCALES = ("tiny", "small", "full")


class ProvenanceError(ValueError):
    """A stored result without (complete) provenance."""


def git_commit(repo: Path = REPO_ROOT) -> str:
    """HEAD's hash, with "+dirty" when the work tree has uncommitted changes; "unknown" outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def device_name(device: str | torch.device = "cpu") -> str:
    """A human-readable name of the device that produced a number."""
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


def provenance(scale: str, config: dict[str, Any], device: str | torch.device = "cpu", **extra: Any) -> dict[str, Any]:
    """The record stored beside a result."""
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}: choose one of {', '.join(SCALES)}")
    return {
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(device),
        "scale": scale,
        "config": config,
        "torch": torch.__version__,
        "python": platform.python_version(),
        **extra,
    }


def check_provenance(record: dict[str, Any], source: str) -> None:
    missing = [k for k in PROVENANCE_KEYS if not record.get(k) and record.get(k) != {}]
    if missing:
        raise ProvenanceError(f"{source}: provenance lacks {', '.join(missing)}")
    if record["scale"] not in SCALES:
        raise ProvenanceError(f"{source}: provenance scale={record['scale']!r} is not one of {', '.join(SCALES)}")


def save_result(path: str | os.PathLike, result: Any, prov: dict[str, Any]) -> Path:
    """Write ``{"result": ..., "provenance": ...}`` atomically as JSON."""
    path = Path(path)
    check_provenance(prov, str(path))
    atomic_write_bytes((json.dumps({"result": result, "provenance": prov}, indent=1) + "\n").encode(), path)
    return path


def load_result(path: str | os.PathLike) -> tuple[Any, dict[str, Any]]:
    """(result, provenance) of a stored result; a file without provenance is an error."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, json.JSONDecodeError) as exc:
        raise ProvenanceError(f"{path}: not a readable result file ({exc})") from exc
    if not isinstance(data, dict) or "result" not in data or "provenance" not in data:
        raise ProvenanceError(f"{path}: a stored result needs the keys 'result' and 'provenance'")
    check_provenance(data["provenance"], str(path))
    return data["result"], data["provenance"]


def describe(prov: dict[str, Any]) -> str:
    """One line to print under a number: where it came from."""
    return f"scale={prov['scale']} · device={prov['device']} · commit={str(prov['commit'])[:12]} · date={prov['date']}"
