"""Shared fixtures: where the real test data lives, and deterministic torch."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CANLIB_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture(autouse=True)
def _deterministic_torch():
    torch.manual_seed(0)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    yield


@pytest.fixture
def shared_data() -> Path:
    """The folder of real corpora (CANLIB_DATA_DIR, else ../shared/data); skip if absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} not present")
    return SHARED_DATA
