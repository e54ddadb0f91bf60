"""One style for the code: ruff's lint rules and its formatter, configured in pyproject.toml ([tool.ruff])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


def ruff() -> str:
    exe = Path(sys.executable).with_name("ruff")
    found = str(exe) if exe.exists() else shutil.which("ruff")
    if not found:
        pytest.fail("ruff is not installed: it is in the test extra (pip install -e '.[test]')", pytrace=False)
    return found


def test_the_code_passes_ruffs_lint_rules():
    out = subprocess.run([ruff(), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def test_the_code_is_as_ruff_formats_it():
    out = subprocess.run([ruff(), "format", "--check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, "run `ruff format .`:\n" + out.stdout[-6000:] + out.stderr[-2000:]
