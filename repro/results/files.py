"""Stored results with their provenance.

Every number the book shows is either computed while the chapter runs or loaded
from a JSON file that a canlib command wrote together with where it came from:
git commit, date, device, scale and the configuration. ``load_result`` refuses a
file without that record, so a number can never lose its origin.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from canlib.catalogue import SCALES
from canlib.io import atomic_write_bytes, origin

PROVENANCE_KEYS = ("commit", "date", "device", "scale", "config")


class ProvenanceError(ValueError):
    """A stored result without (complete) provenance."""


def provenance(scale: str, config: dict[str, Any], device: str | torch.device = "cpu", **extra: Any) -> dict[str, Any]:
    """The record stored beside a result."""
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}: choose one of {', '.join(SCALES)}")
    return {**origin(device), "scale": scale, "config": config, **extra}


def check_provenance(record: dict[str, Any], source: str) -> None:
    if missing := [k for k in PROVENANCE_KEYS if not record.get(k) and record.get(k) != {}]:
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
